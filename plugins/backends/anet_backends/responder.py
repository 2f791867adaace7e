"""What the backends module uses of the task layer's responder, as a typed protocol.

:class:`anet_core.tasks.responder.Responder` is the implementation; tests drive the forwarder
with a recording double. Messages and artifacts are A2A wire JSON, passed on as the backend
wrote them (the responder puts the requester's task and context ids on messages).
"""

from __future__ import annotations

import asyncio
from typing import Any, Protocol

WireObject = dict[str, Any]
ASKS_FOR_INPUT = "The agent needs more input."
"""Shown to the requester when the backend asks for input without a message."""


class Responder(Protocol):
    cancelled: asyncio.Event
    """Set when the requester canceled the task."""
    request_metadata: dict[str, Any]
    """The request-level metadata of the message being served (the last ``next_message()``)."""

    async def working(self, message: WireObject | None = None) -> None: ...

    async def artifact(self, artifact: WireObject, *, append: bool = False,
                       last_chunk: bool = True) -> None: ...

    async def input_required(self, message: WireObject | str) -> None: ...

    async def next_message(self) -> WireObject: ...

    async def complete(self, message: WireObject | None = None) -> None: ...

    async def reply_message(self, message: WireObject) -> None:
        """Complete with a reply the requester's client receives as a Message, not a Task."""

    async def fail(self, reason: str, message: WireObject | None = None) -> None: ...

    async def to_inbox(self, reason: str) -> None:
        """Give the task up: it waits in the operator's inbox; ``reason`` goes to the log."""
