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

    async def working(self, message: WireObject | None = None) -> None: ...

    async def artifact(self, artifact: WireObject, *, append: bool = False,
                       last_chunk: bool = True) -> None: ...

    async def input_required(self, message: WireObject | str) -> None: ...

    async def next_message(self) -> WireObject: ...

    async def complete(self, message: WireObject | None = None) -> None: ...

    async def fail(self, reason: str, message: WireObject | None = None) -> None: ...


async def leave_to_operator(responder: Responder, reason: str) -> None:
    """Hand the task back to the operator's inbox.

    The task layer's responder has no way to do that yet (see docs/backends.md, "Open
    points"); until it has ``to_inbox``, the requester is told the reason as a failure.
    """
    to_inbox = getattr(responder, "to_inbox", None)
    if to_inbox is not None:
        await to_inbox(reason)
    else:
        await responder.fail(reason)
