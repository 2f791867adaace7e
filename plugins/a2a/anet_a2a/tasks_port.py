"""The ports through which the operations reach an agent's tasks.

:class:`TasksPort` is what every port offers; :class:`AgentTasks` is the door to the task
layer (``node.tasks``, requester side) for the network's agents; ``peers.tasks.PeerTasks``
reaches direct peers with the outbound client; ``publish.surface.PublishedTasks`` serves the
tasks of a published alias. The task layer speaks anet (``TaskError`` with a kebab-case
reason); clients speak A2A, so each refusal reaches the client as the A2A error docs/a2a.md
("Errors") names, with the task layer's sentence as its message.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from anet_a2a.replies import no_such_agent
from anet_core.api import AidError, AnetError, TaskError, TaskLayer, TaskMetadata, TaskSubscription
from anet_core.wire import A2AError, A2AErrorKind

T = TypeVar("T")

_KINDS = {
    "task-not-found": A2AErrorKind.TASK_NOT_FOUND,
    "task-not-cancelable": A2AErrorKind.TASK_NOT_CANCELABLE,
    "task-terminal": A2AErrorKind.UNSUPPORTED_OPERATION,
    "task-not-waiting": A2AErrorKind.UNSUPPORTED_OPERATION,
    "not-registered": A2AErrorKind.UNSUPPORTED_OPERATION,
    "hub-unavailable": A2AErrorKind.UNSUPPORTED_OPERATION,
    "invalid-message": A2AErrorKind.INVALID_PARAMS,
    "invalid-params": A2AErrorKind.INVALID_PARAMS,
}


REFUSALS = (TaskError, AidError)
"""What the task layer raises for a request it refuses."""


class TasksPort(Protocol):
    """The tasks of one agent; every refusal is an ``A2AError``."""

    async def send(self, message: dict[str, Any],
                   metadata: dict[str, Any] | None = None) -> dict[str, Any]: ...

    def get(self, task_id: str) -> dict[str, Any]: ...

    def list(self, **query: Any) -> dict[str, Any]: ...

    async def cancel(self, task_id: str) -> dict[str, Any]: ...

    def subscribe(self, task_id: str) -> TaskSubscription: ...


def a2a_error(aid: str, error: AnetError) -> A2AError:
    """The A2A form of a task-layer refusal; ``anet.reason`` keeps the precise word."""
    if error.reason in {"unknown-agent", "invalid-aid"}:
        return no_such_agent(aid)
    kind = _KINDS.get(error.reason, A2AErrorKind.INTERNAL_ERROR)
    message = f"{error.message}; {error.hint}" if error.hint else error.message
    return A2AError(kind, message, details={TaskMetadata.REASON: error.reason})


@dataclass(frozen=True)
class AgentTasks:
    """The tasks of one remote agent: every call carries its AID."""

    aid: str
    layer: TaskLayer

    def _call(self, call: Callable[[], T]) -> T:
        try:
            return call()
        except REFUSALS as error:
            raise a2a_error(self.aid, error) from None

    async def send(self, message: dict[str, Any],
                   metadata: dict[str, Any] | None = None) -> dict[str, Any]:
        try:
            return await self.layer.send(self.aid, message, metadata=metadata)
        except REFUSALS as error:
            raise a2a_error(self.aid, error) from None

    def get(self, task_id: str) -> dict[str, Any]:
        return self._call(lambda: self.layer.get(self.aid, task_id))

    def list(self, **query: Any) -> dict[str, Any]:
        return self._call(lambda: self.layer.list(self.aid, **query))

    async def cancel(self, task_id: str) -> dict[str, Any]:
        try:
            return await self.layer.cancel(self.aid, task_id)
        except REFUSALS as error:
            raise a2a_error(self.aid, error) from None

    def subscribe(self, task_id: str) -> TaskSubscription:
        return self._call(lambda: self.layer.subscribe(self.aid, task_id))
