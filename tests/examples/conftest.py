"""The example agents' tests: each agent runs in this event loop (``tests.examples.agents``)."""

from __future__ import annotations

import functools
import shutil
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest

from examples import tck_agent, text_agent
from tests.examples.agents import TEST_RESUBSCRIBE_HOLD_S, RunningAgent, running


@pytest.fixture
def short_tmp() -> Iterator[Path]:
    """A private directory with a short path: a unix socket path must fit in 108 bytes."""
    path = Path(tempfile.mkdtemp(prefix="anet-ex-"))
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
async def text_agent_server(short_tmp: Path) -> AsyncIterator[RunningAgent]:
    async with running(text_agent.build_app, short_tmp) as agent:
        yield agent


@pytest.fixture
async def tck_agent_server(short_tmp: Path) -> AsyncIterator[RunningAgent]:
    build_app = functools.partial(tck_agent.build_app,
                                  resubscribe_hold_s=TEST_RESUBSCRIBE_HOLD_S)
    async with running(build_app, short_tmp) as agent:
        yield agent
