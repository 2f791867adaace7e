"""The task layer's vocabulary: a task another agent sent and the responder that answers it,
the gates that hold such a task or its end, a veto of the inbound policy, and the turns of a
task this node sent.

Returned by ``anet_take_task`` (:class:`TaskClaim`), ``anet_task_gate`` and ``anet_task_ending``
(:class:`TaskGate`), ``anet_policy_veto`` (:class:`PolicyVeto`), ``anet_requester_waiting`` and
``anet_requester_answer`` (:class:`TurnHandler`), ``anet_requester_cancel``
(:class:`CancelCheck`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import asyncio

    from anet_core.protocol.tasks import Reason


@dataclass(frozen=True)
class InboundTask:
    """A task another agent sent to this node, offered to the modules through ``anet_take_task``.

    ``message`` is the requester's A2A message in wire form (camelCase JSON), unchanged.
    ``trusted`` is False for a peer that is not on the trust list: under the inbound policy
    ``trusted`` such a task is accepted only when a module claims it (else it is rejected with
    ``not_trusted``), so claim it only when serving strangers is safe. ``continued`` is True
    when ``message`` is the requester's answer on a task that waits for input and whose module
    no longer serves it (the daemon restarted): the claiming module starts over with it.
    """

    task_id: str
    context_id: str
    peer_aid: str
    trusted: bool
    skill: str | None
    message: dict[str, Any]
    continued: bool = False
    metadata: dict[str, Any] | None = None
    """The request-level metadata the requester's client sent with ``message`` (SendMessage
    ``metadata``), unchanged; None when it sent none."""
    origin: dict[str, Any] | None = None
    """For a task a module's surface handed in (``TaskLayer.local``; ``peer_aid`` is then
    ``local:<module>:<principal>``, not an AID): the ``anet.*`` keys that module set about the
    caller, e.g. ``anet.publish_alias`` and ``anet.publish_token`` for the a2a module's published
    aliases. Pass them on to a backend as ``anet.peer_aid`` is; None for a network task."""
    question: dict[str, Any] | None = None
    """For the requester's answer on a task that waits for input: the agent's status message it
    answers (A2A Message wire JSON, e.g. a gate's quote); None for a new task."""
    blocking: bool = False
    """True when the requester's client waits for the end of this turn in one blocking call and
    sees no progress (A2A SendMessage without ``returnImmediately``): a module may then serve it
    without reporting progress as it goes (the backends module asks a backend for its final
    answer alone)."""


MessageLike = str | dict[str, Any]
"""A message a module sends through the :class:`Responder`: text, or an A2A Message in wire JSON
(role ROLE_AGENT; the responder fills in the ids and the task's contextId and taskId)."""
ArtifactLike = str | dict[str, Any]
"""An artifact: text (a one-part artifact), or an A2A Artifact in wire JSON."""


class Responder(Protocol):
    """The answering end of one inbound task, what a :class:`TaskClaim`'s ``serve`` receives.

    Every call is persisted and queued for the requester before it returns. Once the task has
    ended (answered here, or canceled by the requester), further calls are ignored, so a module
    never races the requester's cancel; ``cancelled`` tells it to stop working. The task layer's
    implementation is ``anet_core.tasks.responder.TaskResponder``.
    """

    task: InboundTask
    """The task being served."""
    cancelled: asyncio.Event
    """Set when the requester canceled the task: stop working; calls are ignored now."""
    request_metadata: dict[str, Any]
    """The request-level metadata (SendMessage ``metadata``) that came with the message being
    served: the first message's, then that of each :meth:`next_message`."""
    blocking: bool
    """Whether the requester waits for the end of the turn in hand without following its
    progress (:attr:`InboundTask.blocking`): the first message's, then each
    :meth:`next_message`'s."""

    @property
    def ended(self) -> bool:
        """True once the task reached a terminal state (by this responder or by a cancel)."""

    async def working(self, message: MessageLike | None = None) -> None:
        """The task is being worked on; ``message`` is an optional progress note."""

    async def artifact(self, artifact: ArtifactLike, *, append: bool = False,
                       last_chunk: bool = True) -> None:
        """Send an artifact now (or, with ``append``, more parts of one already sent)."""

    async def input_required(self, message: MessageLike) -> None:
        """Ask the requester a question; :meth:`next_message` waits for the answer."""

    async def next_message(self) -> dict[str, Any]:
        """The requester's next message on this task (A2A Message wire JSON); its request-level
        metadata is then in ``request_metadata``."""

    async def complete(self, message: MessageLike | None = None,
                       artifacts: Iterable[ArtifactLike] = ()) -> None:
        """End the task successfully. ``artifacts`` join those already sent."""

    async def reply_message(self, message: MessageLike) -> None:
        """End the task with ``message`` as the whole answer: the agent answered with a Message,
        not a Task (A2A). The requester's client gets that Message; the task completes with it
        as its status message and no artifacts (``task.update`` ``messageReply``)."""

    async def fail(self, reason: str, message: MessageLike | None = None) -> None:
        """End the task as failed; ``reason`` (one line, no secrets) is shown to the requester
        when no ``message`` is given (anet.reason ``provider_failed``)."""

    async def reject(self, reason: str, message: MessageLike | None = None) -> None:
        """Refuse the task (anet.reason ``rejected_by_provider``)."""

    async def to_inbox(self, reason: str) -> None:
        """Give the task up: it waits in the operator's inbox (``queued_for_operator``) and
        this responder ends. ``reason`` (one line, no secrets) goes to the log."""

    def record(self, kind: str, data: dict[str, Any]) -> None:
        """Add a record about this task to the node's evidence chain (``kind``:
        ``<module>.<event>``; ``data``: JSON, no message content or secrets). It is kept in
        the transaction of the task's next change, the one this responder's next call makes
        (or the requester's cancel): what the record says and what it led to reach the disk
        together, in one commit. When no change follows (the task has ended, or ``serve``
        returns first), it is kept at once."""


@dataclass(frozen=True)
class TaskClaim:
    """A module's claim on an inbound task: the core awaits ``serve`` to have it served.

    ``serve`` receives the task and the :class:`Responder` through which it reports progress,
    artifacts and the final answer.
    """

    module: str
    serve: Callable[[InboundTask, Responder], Awaitable[None]]


class GateAction(StrEnum):
    """What a module's gate (``anet_task_gate``, ``anet_task_ending``) does with a task."""

    PASS = "pass"
    """Hand the task on (to the modules' ``anet_take_task``, else the inbox), or, at its end,
    let the end through."""
    HOLD = "hold"
    """The task waits for the requester's input with the verdict's message (a quote); the
    requester's answer is offered to the gate again. At its end: the end is deferred (the task
    stays as it is) until the module gives it again (``TaskLayer.end_received``)."""
    FAIL = "fail"
    """The task fails with the verdict's message; nothing reaches a module or the inbox (at its
    end: the artifacts are withheld)."""
    CANCEL = "cancel"
    """The requester withdrew what the gate waited for (module x402: the payer voided its
    payment at the rail, as it canceled the task): the task ends canceled
    (``canceled_by_requester``) with the verdict's message, artifacts withheld."""


@dataclass(frozen=True)
class GateVerdict:
    """A gate's decision on one task.

    ``message`` is an agent message (text, or an A2A Message in wire JSON; the core fills in the
    ids): the status message of HOLD and FAIL; for PASS at the task's end, its ``metadata`` joins
    the final status message (and it becomes that message when the end has none). ``records``
    are evidence records ``(kind, data)`` the core appends once the verdict is committed.
    """

    action: GateAction
    message: MessageLike | None = None
    records: tuple[tuple[str, dict[str, Any]], ...] = ()


@dataclass(frozen=True)
class TaskGate:
    """A module's hold on an inbound task (``anet_task_gate``) or on its end
    (``anet_task_ending``): ``verdict`` decided at once (inside the receiving transaction), or
    ``check``, awaited by the core (it may do I/O: ask a payment rail) for the verdict."""

    module: str
    verdict: GateVerdict | None = None
    check: Callable[[], Awaitable[GateVerdict]] | None = None


@dataclass(frozen=True)
class EndingTask:
    """An inbound task a gate admitted, about to end (``anet_task_ending``): the end a module or
    the operator gave it (``state``, ``message``, ``artifacts``, ``message_reply``), the task as
    stored (``task``: A2A Task wire JSON with its history), its ``anet.reason`` and the ``gate``
    module that admitted it. ``outcome`` is that end as JSON, what ``TaskLayer.end_received``
    takes to give the same end again (after a restart)."""

    task_id: str
    peer_aid: str
    skill: str | None
    gate: str
    state: str
    message: dict[str, Any] | None
    artifacts: list[dict[str, Any]]
    task: dict[str, Any]
    reason: str | None = None
    message_reply: bool = False

    @property
    def outcome(self) -> dict[str, Any]:
        """The end as plain JSON (to persist it, and give it again with ``end_received``)."""
        return {"state": self.state, "message": self.message, "artifacts": self.artifacts,
                "reason": self.reason, "messageReply": self.message_reply}


@dataclass(frozen=True)
class PolicyVeto:
    """A module's refusal of an inbound policy (``anet_policy_veto``): ``reason`` names what in
    the module's configuration forbids it; ``hint`` says how to resolve it."""

    module: str
    reason: str
    hint: str = ""



@dataclass(frozen=True)
class RequesterTurn:
    """A task this node sent (requester side) at a turn a module may act on: the remote agent
    asked for input (``anet_requester_waiting``), or the client answers it
    (``anet_requester_answer``).

    ``task`` is a copy of the task as stored (A2A Task JSON; the agent's question is
    ``task["status"]["message"]``). ``message`` is the client's answer (A2A Message wire JSON,
    role user) and ``metadata`` its request-level metadata, both None for the agent's turn.
    ``extensions`` are the extension URIs the client activated: on the client's request for an
    answer; for the agent's turn, the ``extensions`` of the client's last message (the a2a
    module writes the activated ones there).
    """

    task_id: str
    context_id: str
    peer_aid: str
    task: dict[str, Any]
    message: dict[str, Any] | None = None
    metadata: dict[str, Any] | None = None
    extensions: frozenset[str] = frozenset()


@dataclass(frozen=True)
class TurnAnswer:
    """What a module decided at a :class:`RequesterTurn`.

    ``send``: the message (A2A Message wire JSON, role user) this node sends on the task, in
    place of the client's answer, or as the node's own answer to the agent's question (give it
    a ``messageId`` derived from what it carries, so that sending it again is recognised).
    ``hold``: send nothing; the task keeps waiting for input with this ``anet.reason`` and, when
    given, ``status`` (an A2A Message, role agent) as its new status message. Neither: the turn
    goes on as without the module. ``evidence``: (kind, data) records the core appends to the
    evidence chain once the turn is stored.
    """

    send: dict[str, Any] | None = None
    hold: Reason | None = None
    status: dict[str, Any] | None = None
    evidence: tuple[tuple[str, dict[str, Any]], ...] = ()


@dataclass(frozen=True)
class TurnHandler:
    """A module's claim on a :class:`RequesterTurn`: the core awaits ``run(turn)`` (at most one
    run per task at a time) and carries out the :class:`TurnAnswer`."""

    module: str
    run: Callable[[RequesterTurn], Awaitable[TurnAnswer]]



@dataclass(frozen=True)
class CancelVerdict:
    """A module's decision on the client's cancel of a task this node sent.

    ``refused`` None lets the cancel go on; else it is refused with that kebab-case reason
    (``anet.reason`` of the client's TaskNotCancelableError), ``message`` saying why and
    ``hint`` what to do, and the task goes on. ``evidence``: (kind, data) records the core
    appends to the evidence chain either way.
    """

    refused: str | None = None
    message: str = ""
    hint: str = ""
    evidence: tuple[tuple[str, dict[str, Any]], ...] = ()


@dataclass(frozen=True)
class CancelCheck:
    """A module's say on the cancel of a :class:`RequesterTurn` (``turn.message`` None): the
    core awaits ``run(turn)`` before anything of the cancel takes effect, with no other turn
    of the task running."""

    module: str
    run: Callable[[RequesterTurn], Awaitable[CancelVerdict]]
