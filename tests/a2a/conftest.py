"""The local A2A endpoint between two real nodes (``tests.a2a.local``); skipped without the a2a
module."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

pytest.importorskip("anet_a2a")

from tests.a2a.local import Local, two_nodes


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[Local]:
    async with two_nodes(tmp_path) as nodes:
        yield nodes
