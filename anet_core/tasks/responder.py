"""The task layer's :class:`anet_core.records.Responder`: how a module that claimed an inbound
task answers it.

A module's ``TaskClaim.serve(task, responder)`` is awaited in the background; each call of the
responder becomes a provider update (``Provider.report``), persisted and queued for the requester
before it returns. The contract and each method's meaning are in the protocol's docstrings.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from anet_core.protocol.tasks import ArtifactChunk, Reason
from anet_core.records import ArtifactLike, InboundTask, MessageLike
from anet_core.tasks.common import new_id
from anet_core.wire import TaskState

if TYPE_CHECKING:
    from anet_core.tasks.provider import Provider


class TaskResponder:
    """The answering end of one inbound task, for the provider side of the task layer."""

    def __init__(self, provider: Provider, task: InboundTask) -> None:
        self._provider = provider
        self.task = task
        self.cancelled = asyncio.Event()
        self.request_metadata: dict[str, Any] = dict(task.metadata or {})
        self.blocking = task.blocking
        self._messages: asyncio.Queue[tuple[dict[str, Any], dict[str, Any], bool]] = \
            asyncio.Queue()
        self._ended = False
        self.evidence: list[tuple[str, dict[str, Any]]] = []
        """Records waiting for the task's next change (:meth:`record`); the transaction that
        keeps them empties the list."""

    @property
    def ended(self) -> bool:
        return self._ended

    async def working(self, message: MessageLike | None = None) -> None:
        await self._report(TaskState.TASK_STATE_WORKING, message)

    async def artifact(self, artifact: ArtifactLike, *, append: bool = False,
                       last_chunk: bool = True) -> None:
        chunk = ArtifactChunk(artifact=self.as_artifact(artifact), append=append,
                              last_chunk=last_chunk)
        await self._report(TaskState.TASK_STATE_WORKING, None, chunks=[chunk])

    async def input_required(self, message: MessageLike) -> None:
        await self._report(TaskState.TASK_STATE_INPUT_REQUIRED, message)

    async def next_message(self) -> dict[str, Any]:
        message, self.request_metadata, self.blocking = await self._messages.get()
        return message

    async def complete(self, message: MessageLike | None = None,
                       artifacts: Iterable[ArtifactLike] = ()) -> None:
        await self._report(TaskState.TASK_STATE_COMPLETED, message,
                           final=[self.as_artifact(artifact) for artifact in artifacts])

    async def reply_message(self, message: MessageLike) -> None:
        await self._report(TaskState.TASK_STATE_COMPLETED, message, final=[],
                           message_reply=True)

    async def fail(self, reason: str, message: MessageLike | None = None) -> None:
        await self._report(TaskState.TASK_STATE_FAILED, message or reason,
                           reason=Reason.PROVIDER_FAILED, final=[])

    async def reject(self, reason: str, message: MessageLike | None = None) -> None:
        await self._report(TaskState.TASK_STATE_REJECTED, message or reason,
                           reason=Reason.REJECTED_BY_PROVIDER, final=[])

    async def to_inbox(self, reason: str) -> None:
        if self._ended:
            self._provider.keep_now(self.evidence)
        else:
            await self._provider.release(self.task.task_id, reason, evidence=self.evidence)

    def record(self, kind: str, data: dict[str, Any]) -> None:
        self.evidence.append((kind, data))
        if self._ended:
            self._provider.keep_now(self.evidence)

    # --- used by the task layer ---------------------------------------------------------------

    def deliver(self, message: dict[str, Any], metadata: dict[str, Any] | None = None, *,
                blocking: bool = False) -> None:
        self._messages.put_nowait((message, dict(metadata or {}), blocking))

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
            self._provider.keep_now(self.evidence)  # no change of the task will carry them
            return
        await self._provider.report(
            self.task.task_id, state,
            message=None if message is None else self.as_message(message),
            chunks=chunks or [], final_artifacts=final, reason=reason,
            message_reply=message_reply, evidence=self.evidence)

