"""The ports through which the operations reach an agent's tasks.

:class:`TasksPort` is what every port offers; :class:`AgentTasks` is the door to the task
layer (``node.tasks``, requester side) for the network's agents; ``peers.tasks.PeerTasks``
reaches direct peers with the outbound client; ``publish.surface.PublishedTasks`` serves the
tasks of a published alias. The task layer speaks anet (``TaskError`` with a kebab-case
reason); clients speak A2A, so each refusal reaches the client as the A2A error docs/a2a.md
("Errors") names, with the task layer's sentence as its message.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from anet_a2a.replies import no_such_agent
from anet_core.api import (
    AidError,
    AnetError,
    PeerInfo,
    TaskError,
    TaskLayer,
    TaskMetadata,
    TaskNotCancelable,
    TaskSubscription,
    Verification,
)
from anet_core.wire import A2AError, A2AErrorKind

T = TypeVar("T")

_KINDS = {
    "task-not-found": A2AErrorKind.TASK_NOT_FOUND,
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

    async def send(self, message: dict[str, Any], metadata: dict[str, Any] | None = None, *,
                   blocking: bool = False) -> dict[str, Any]:
        """A new task or the next turn of one; ``blocking``: the client waits for the end of
        the turn in this call and sees no progress (``TaskLayer.send``)."""

    def get(self, task_id: str) -> dict[str, Any]: ...

    def list(self, **query: Any) -> dict[str, Any]: ...

    async def cancel(self, task_id: str) -> dict[str, Any]: ...

    def subscribe(self, task_id: str) -> TaskSubscription: ...


def a2a_error(aid: str, error: AnetError) -> A2AError:
    """The A2A form of a task-layer refusal; ``anet.reason`` keeps the precise word."""
    if error.reason in {"unknown-agent", "invalid-aid"}:
        return no_such_agent(aid)
    kind = A2AErrorKind.TASK_NOT_CANCELABLE if isinstance(error, TaskNotCancelable) \
        else _KINDS.get(error.reason, A2AErrorKind.INTERNAL_ERROR)
    message = f"{error.message}; {error.hint}" if error.hint else error.message
    return A2AError(kind, message, details={TaskMetadata.REASON: error.reason})


def chosen_skill(message: dict[str, Any], peer: PeerInfo) -> str | None:
    """The skill of the agent a new task is for (docs/a2a.md, "Sending a task"): the
    message's ``anet.skill`` metadata, checked against the skills of the agent's card when this
    node verified the card; else the card's only skill; else none."""
    card = peer.card if peer.verification is Verification.VERIFIED and peer.card else {}
    skills = [str(skill["id"]) for skill in card.get("skills") or []
              if isinstance(skill, dict) and skill.get("id")]
    named = (message.get("metadata") or {}).get(TaskMetadata.SKILL)
    if named is None:
        return skills[0] if len(skills) == 1 else None
    listed = ", ".join(skills) or "none"
    if not isinstance(named, str) or not named:
        raise A2AError(A2AErrorKind.INVALID_PARAMS,
                       f"{TaskMetadata.SKILL} is {named!r}: give the id of one of the agent's "
                       f"skills as a string (its card lists: {listed})",
                       details={TaskMetadata.REASON: "unknown-skill"})
    if card and named not in skills:
        raise A2AError(A2AErrorKind.INVALID_PARAMS,
                       f"the agent {peer.aid} has no skill {named!r}; its card lists: {listed}",
                       details={TaskMetadata.REASON: "unknown-skill"})
    return named


@dataclass(frozen=True)
class AgentTasks:
    """The tasks of one remote agent: every call carries its AID. ``peer`` describes the agent
    (its verified card names the skills a new task may ask for)."""

    aid: str
    layer: TaskLayer
    peer: Callable[[str], Awaitable[PeerInfo]]

    def _call(self, call: Callable[[], T]) -> T:
        try:
            return call()
        except REFUSALS as error:
            raise a2a_error(self.aid, error) from None

    async def send(self, message: dict[str, Any], metadata: dict[str, Any] | None = None, *,
                   blocking: bool = False) -> dict[str, Any]:
        skill = None if message.get("taskId") else chosen_skill(message, await self.peer(self.aid))
        try:
            return await self.layer.send(self.aid, message, skill=skill, metadata=metadata,
                                         blocking=blocking)
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
