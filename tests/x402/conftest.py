"""The module x402's tests: a real hub in this event loop and real nodes (skipped without the
x402 or hub module)."""

import pytest

pytest.importorskip("anet_x402")

from tests.support.hubs import hub, hub_factory  # noqa: F401 - fixtures
