"""Bounded waits: poll until a condition holds, fail naming it at the deadline, never hang."""

from __future__ import annotations

import asyncio
import time
from typing import Any

STEP_TIMEOUT_S = 30.0
"""How long one step may take: generous, since a loaded machine is slow; a test that passes
never waits that long."""
POLL_S = 0.01
PROCESS_POLL_S = 0.05
"""A predicate that asks another process (a CLI call, a socket) is asked less often."""


async def eventually(predicate: Any, what: str = "", timeout: float = STEP_TIMEOUT_S) -> Any:
    """Poll ``predicate`` (a function, or a coroutine function) without blocking the event loop
    until it returns something true, and return that; fail naming ``what`` at the deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        value = predicate()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return value
        if loop.time() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f} s waiting until "
                                 f"{what or predicate}")
        await asyncio.sleep(POLL_S)


def wait_for(predicate: Any, what: str, timeout: float = STEP_TIMEOUT_S) -> Any:
    """The same outside an event loop (blocking), for tests that drive processes."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(PROCESS_POLL_S)
    raise AssertionError(f"timed out waiting until {what}")
