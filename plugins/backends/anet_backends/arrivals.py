"""A backend's events as they arrive, taken in batches, and progress folded into a completion.

The forwarder reports what arrived together as one (docs/backends.md, "The forwarding rules"):
a backend that answers at once sends its WORKING status, its artifacts and its completion
within a millisecond or two, and the requester gets one update with the receipt for them
instead of one per event.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import suppress
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

Event = TypeVar("Event")
WireObject = dict[str, Any]

READ_AHEAD = 64
"""Events read from a backend before the forwarder has reported them: a backend streaming
faster than the requester is told waits, as it did when each event was reported before the
next was read."""


@dataclass(frozen=True)
class _End:
    error: Exception | None


class Arrivals(Generic[Event]):
    """Reads ``events`` as they come (while the context is open) and hands them out in
    batches: each time, every event that has arrived by then."""

    def __init__(self, events: AsyncIterator[Event]) -> None:
        self._events = events
        self._queue: asyncio.Queue[Event | _End] = asyncio.Queue(READ_AHEAD)
        self._reader: asyncio.Future[None] | None = None
        self._end: _End | None = None

    async def __aenter__(self) -> Arrivals[Event]:
        self._reader = asyncio.ensure_future(self._read())
        return self

    async def __aexit__(self, *_: object) -> None:
        assert self._reader is not None
        self._reader.cancel()
        with suppress(asyncio.CancelledError):
            await self._reader

    async def _read(self) -> None:
        try:
            async for event in self._events:
                await self._queue.put(event)
        except Exception as error:  # noqa: BLE001 - next() raises it, after the events before it
            await self._queue.put(_End(error))
            return
        await self._queue.put(_End(None))

    async def next(self, timeout: float) -> list[Event] | None:
        """The events that have arrived, waiting up to ``timeout`` seconds for the first
        (TimeoutError then, and nothing is lost); None once every event was handed out. A
        failure of the events is raised once those before it were handed out."""
        if self._end is None:
            async with asyncio.timeout(timeout):
                item = await self._queue.get()
            batch: list[Event] = []
            while True:
                if isinstance(item, _End):
                    self._end = item  # the reader put nothing after it
                    break
                batch.append(item)
                if self._queue.empty():
                    return batch
                item = self._queue.get_nowait()
            if batch:
                return batch
        assert self._end is not None
        if self._end.error is not None:
            raise self._end.error
        return None


@dataclass(frozen=True)
class Progress:
    """A WORKING status (``artifact`` None) or an artifact event, not reported yet."""

    artifact: WireObject | None = None
    message: WireObject | None = None
    append: bool = False
    last_chunk: bool = True

    @property
    def bare(self) -> bool:
        """Says nothing the task's completion will not say (no WORKING note)."""
        return self.artifact is not None or self.message is None


def folded(progress: list[Progress]) -> list[WireObject] | None:
    """The artifacts ``progress`` brings, as whole artifacts a completion can carry; None when
    it says more than that (a WORKING note, or more parts of an artifact reported earlier)."""
    artifacts: dict[str, WireObject] = {}
    for event in progress:
        if event.artifact is None:
            if not event.bare:
                return None
            continue
        artifact_id = event.artifact["artifactId"]
        if not event.append:
            artifacts[artifact_id] = event.artifact
        elif artifact_id in artifacts:
            whole = artifacts[artifact_id]  # as the task layer appends (tasks/common.py)
            artifacts[artifact_id] = whole | {"parts": whole["parts"] + event.artifact["parts"]}
        else:
            return None
    return list(artifacts.values())
