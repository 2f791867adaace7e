"""The Responder: how a module that claimed an inbound task answers it.

A module's ``TaskClaim.serve(task, responder)`` is awaited in the background; through the
responder it reports progress and artifacts, asks for input, and ends the task. Every call is
persisted and queued for the requester before it returns. Once the task has ended (answered,
or canceled by the requester), further calls are ignored, so a module never has to race the
requester's cancel; ``cancelled`` tells it to stop working.

Messages may be given as text or as an A2A Message in wire JSON (role ROLE_AGENT; ids are
filled in). Artifacts are A2A Artifact wire JSON or text (a one-part artifact).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from anet_core.protocol.tasks import ArtifactChunk, Reason
from anet_core.records import InboundTask
from anet_core.tasks.common import new_id
from anet_core.wire import TaskState

if TYPE_CHECKING:
    from anet_core.tasks.provider import Provider

MessageLike = str | dict[str, Any]
ArtifactLike = str | dict[str, Any]


class Responder:
    """The answering end of one inbound task (see the module docstring)."""

    def __init__(self, provider: Provider, task: InboundTask) -> None:
        self._provider = provider
        self.task = task
        self.cancelled = asyncio.Event()
        """Set when the requester canceled the task: stop working; calls are ignored now."""
        self.request_metadata: dict[str, Any] = dict(task.metadata or {})
        """The request-level metadata (SendMessage ``metadata``) that came with the message
        being served: the first message's, then that of each ``next_message()``."""
        self._messages: asyncio.Queue[tuple[dict[str, Any], dict[str, Any]]] = asyncio.Queue()
        self._ended = False

    @property
    def ended(self) -> bool:
        """True once the task reached a terminal state (by this responder or by a cancel)."""
        return self._ended

    async def working(self, message: MessageLike | None = None) -> None:
        """The task is being worked on; ``message`` is an optional progress note."""
        await self._report(TaskState.TASK_STATE_WORKING, message)

    async def artifact(self, artifact: ArtifactLike, *, append: bool = False,
                       last_chunk: bool = True) -> None:
        """Send an artifact now (or, with ``append``, more parts of one already sent)."""
        chunk = ArtifactChunk(artifact=self.as_artifact(artifact), append=append,
                              last_chunk=last_chunk)
        await self._report(TaskState.TASK_STATE_WORKING, None, chunks=[chunk])

    async def input_required(self, message: MessageLike) -> None:
        """Ask the requester a question; :meth:`next_message` waits for the answer."""
        await self._report(TaskState.TASK_STATE_INPUT_REQUIRED, message)

    async def next_message(self) -> dict[str, Any]:
        """The requester's next message on this task (A2A Message wire JSON); its request-level
        metadata is then in ``request_metadata``."""
        message, self.request_metadata = await self._messages.get()
        return message

    async def complete(self, message: MessageLike | None = None,
                       artifacts: Iterable[ArtifactLike] = ()) -> None:
        """End the task successfully. ``artifacts`` join those already sent."""
        await self._report(TaskState.TASK_STATE_COMPLETED, message,
                           final=[self.as_artifact(artifact) for artifact in artifacts])

    async def reply_message(self, message: MessageLike) -> None:
        """End the task with ``message`` as the whole answer: the agent answered with a Message,
        not a Task (A2A). The requester's client gets that Message; the task completes with it
        as its status message and no artifacts (``task.update`` ``messageReply``)."""
        await self._report(TaskState.TASK_STATE_COMPLETED, message, final=[],
                           message_reply=True)

    async def fail(self, reason: str, message: MessageLike | None = None) -> None:
        """End the task as failed; ``reason`` (one line, no secrets) is shown to the requester
        when no ``message`` is given. anet.reason is ``provider_failed``."""
        await self._report(TaskState.TASK_STATE_FAILED, message or reason,
                           reason=Reason.PROVIDER_FAILED, final=[])

    async def reject(self, reason: str, message: MessageLike | None = None) -> None:
        """Refuse the task; anet.reason is ``rejected_by_provider``."""
        await self._report(TaskState.TASK_STATE_REJECTED, message or reason,
                           reason=Reason.REJECTED_BY_PROVIDER, final=[])

    async def to_inbox(self, reason: str) -> None:
        """Give the task up: it waits in the operator's inbox (``queued_for_operator``) and
        this responder ends. ``reason`` (one line, no secrets) goes to the log."""
        if not self._ended:
            await self._provider.release(self.task.task_id, reason)

    # --- used by the task layer ---------------------------------------------------------------

    def deliver(self, message: dict[str, Any], metadata: dict[str, Any] | None = None) -> None:
        self._messages.put_nowait((message, dict(metadata or {})))

    def end(self, *, cancelled: bool) -> None:
        self._ended = True
        if cancelled:
            self.cancelled.set()

    def as_message(self, message: MessageLike) -> dict[str, Any]:
        base = {"messageId": new_id(), "role": "ROLE_AGENT"}
        body = {"parts": [{"text": message}]} if isinstance(message, str) else dict(message)
        return base | body | {"contextId": self.task.context_id, "taskId": self.task.task_id}

    @staticmethod
    def as_artifact(artifact: ArtifactLike) -> dict[str, Any]:
        if isinstance(artifact, str):
            return {"artifactId": new_id(), "parts": [{"text": artifact}]}
        return dict(artifact)

    async def _report(self, state: TaskState, message: MessageLike | None, *,
                      chunks: list[ArtifactChunk] | None = None,
                      final: list[dict[str, Any]] | None = None,
                      reason: Reason | None = None, message_reply: bool = False) -> None:
        if self._ended:
            return
        await self._provider.report(
            self.task.task_id, state,
            message=None if message is None else self.as_message(message),
            chunks=chunks or [], final_artifacts=final, reason=reason,
            **({"message_reply": True} if message_reply else {}))

