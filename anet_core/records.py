"""The typed records that hooks return. The core runs them; a hook implementation does no I/O."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    import argparse
    import asyncio

    from aiohttp import web
    from pydantic import BaseModel

    from anet_core.cli.context import CliContext
    from anet_core.control.client import AsyncControlClient
    from anet_core.doctor import CheckContext
    from anet_core.link import SearchQuery
    from anet_core.protocol.tasks import Reason
    from anet_core.wire import AgentExtension

_KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class ConfigBlock:
    """The block ``modules.<module>`` of config.json, validated by ``model``.

    ``also_read_from`` names other modules' blocks in which this module's keys may be written
    too: the loader moves them here before validation, whether the other module is installed or
    not (the backends module reads ``modules.a2a.backends``, docs/configuration.md).
    """

    module: str
    model: type[BaseModel]
    also_read_from: tuple[str, ...] = ()


@dataclass(frozen=True)
class Lifespan:
    """A resource or background loop that lives as long as the daemon.

    ``open`` returns an async context manager; the core enters them in hook order and exits them
    in reverse order on shutdown.
    """

    name: str
    open: Callable[[], AbstractAsyncContextManager[Any]]
    module: str = field(kw_only=True)


@dataclass(frozen=True)
class ControlRoutes:
    """Routes a module adds to the control plane, mounted below ``/<module>/``."""

    module: str
    routes: list[web.RouteDef]


class CheckStatus(StrEnum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class CheckResult:
    """What a doctor check found. ``hint`` says what to do whenever the status is not ok."""

    status: CheckStatus
    summary: str
    detail: str = ""
    hint: str = ""


@dataclass(frozen=True)
class DoctorCheck:
    """A named health check. ``name`` is kebab-case and unique across all modules."""

    name: str
    module: str
    summary: str
    run: Callable[[CheckContext], Awaitable[CheckResult]]
    timeout: float = 10.0

    def __post_init__(self) -> None:
        if not _KEBAB.match(self.name):
            raise ValueError(f"Doctor check names are kebab-case, got {self.name!r}")


@dataclass(frozen=True)
class CliCommand:
    """A subcommand of ``anet``.

    ``configure`` adds arguments (or nested subcommands) to the parser argparse made for it;
    ``run`` does the work and returns the exit status.
    """

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, CliContext], int]
    description: str = ""
    aliases: tuple[str, ...] = field(default=())
    module: str = field(kw_only=True)


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
class SkillSource:
    """Skills a module offers on the node's network card (``anet_card_skills``).

    ``read`` returns skills as the card lists them (``{"id", "name", "description", "tags"}``);
    the hub link awaits it before every publication, with a timeout, and leaves out a source
    that fails.
    """

    module: str
    read: Callable[[], Awaitable[list[dict[str, Any]]]]
    backend: str | None = None
    """The ``match`` of the configured backend these skills come from, when they come from one
    (the a2a module publishes an alias with the skills its backend really offers)."""
    prices: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The card's skills (from any source) this module charges for: skill id → its price as
    JSON (module x402: ``{"amount", "asset", "networks"}``). The card's ``charge`` is ``free``
    when none of its skills is priced, ``paid`` when all are, else ``partial``; the prices are
    what the extended card tells a requester."""


@dataclass(frozen=True)
class DirectorySource:
    """Agents a module adds to the node's directory listing (``anet_directory_sources``).

    ``list`` takes the listing's filters (``skill``, ``tag``, ``q`` of a ``SearchQuery``; the
    cursor and limit are the hub's) and returns the agents that match them, shaped like the
    entries of ``directory_listing`` (``aid``, ``name``, ``description``, ``skills``) plus what
    marks where they come from (``directPeer``, ``url``); the core adds ``"source": module``,
    awaits it with a timeout and leaves out a source that fails.
    """

    module: str
    list: Callable[[SearchQuery], Awaitable[list[dict[str, Any]]]]


@dataclass(frozen=True)
class CardExtension:
    """An A2A extension a proxy card declares (an ``AgentExtension`` on the wire).

    ``params`` is plain JSON; ``required`` makes clients that do not request the extension
    fail with ExtensionSupportRequiredError, so leave it False unless that is the point.
    """

    module: str
    uri: str
    description: str = ""
    required: bool = False
    params: dict[str, Any] | None = None
    also_activated_by: tuple[str, ...] = ()
    """Other URIs of the same extension (an older or newer spelling) that a client may request
    in ``A2A-Extensions`` to activate it; the card declares ``uri`` only."""

    def as_agent_extension(self) -> AgentExtension:
        """The extension as the card declares it (``capabilities.extensions``)."""
        from anet_core.wire import AgentExtension

        return AgentExtension(uri=self.uri, description=self.description,
                              required=self.required, params=self.params)


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
class BackendTarget:
    """One configured backend as a backend kind sees it: the keys of ``modules.backends``.

    ``expected_user`` is a user name or a uid; ``peer_check`` is "full" or "path-only".
    """

    match: str
    url: str
    token_file: str | None = None
    expected_user: str | int | None = None
    socket_group: str | None = None
    peer_check: str = "full"
    allow_tcp: bool = False

    @property
    def scheme(self) -> str:
        return self.url.partition(":")[0].lower()


class BackendStage(StrEnum):
    """How far a forward got when it failed; the backends module decides from it what to do."""

    REFUSED = "refused"
    """A check failed before anything was written: the task stays in the inbox."""
    UNREACHABLE = "unreachable"
    """Failed before the backend could have taken the message: retried with backoff."""
    BUSY = "busy"
    """The message was written and the backend said it did not take it (HTTP 503): retried."""
    WRITTEN = "written"
    """Failed after the message was written: never retried, it could run twice."""


class BackendError(Exception):
    """A backend kind's report that a forward did not work, and how far it got."""

    def __init__(self, stage: BackendStage, reason: str) -> None:
        super().__init__(reason)
        self.stage = stage
        self.reason = reason


class BackendChannel(Protocol):
    """A connection to one backend, open for the turns of one task.

    ``send`` forwards an A2A message (wire JSON) with the request ``metadata`` and yields the
    backend's answers as A2A StreamResponse objects (``{"task": ...}``, ``{"message": ...}``,
    ``{"statusUpdate": ...}``, ``{"artifactUpdate": ...}``) until the turn ends; with
    ``blocking`` (the requester waits for the end only: :attr:`InboundTask.blocking`) it may
    yield the end alone. ``cancel`` cancels a backend task. Both raise :class:`BackendError`.
    """

    def send(self, message: dict[str, Any], metadata: dict[str, Any], *,
             blocking: bool = False) -> AsyncIterator[dict[str, Any]]: ...

    async def cancel(self, task_id: str) -> None: ...


BackendOpener = Callable[[BackendTarget], AbstractAsyncContextManager[BackendChannel]]
"""Checks and connects one backend; the context yields a :class:`BackendChannel`."""


@dataclass(frozen=True)
class BackendKind:
    """A way to reach backends whose ``url`` has one of ``schemes``.

    ``open(target)`` returns an async context manager that checks and connects the backend and
    yields a :class:`BackendChannel` (raising :class:`BackendError` when it cannot);
    ``diagnose(target)``, when given, is what ``anet doctor`` reports for such a backend;
    ``skills(target)``, when given, what the node's network card lists for it.
    """

    name: str
    schemes: tuple[str, ...]
    open: BackendOpener
    diagnose: Callable[[BackendTarget], Awaitable[CheckResult]] | None = None
    skills: Callable[[BackendTarget], Awaitable[list[dict[str, Any]]]] | None = None
    """The skills such a backend offers (from its agent card), for the node's network card."""
    pooled: Callable[[], AbstractAsyncContextManager[BackendOpener]] | None = None
    """Entered while the backends module runs, when given: it yields the opener the forwards
    use instead of ``open``, whose channels share what the kind keeps between them (for the
    ``a2a`` kind, each backend's HTTP connections), closed when the module stops."""
    module: str = field(kw_only=True)


@dataclass(frozen=True)
class McpResult:
    """What an MCP tool answers: a short ``text`` for the model to read and the same facts as
    ``data`` (a JSON object), the tool result's structured content."""

    text: str
    data: dict[str, Any]


@dataclass(frozen=True)
class McpCall:
    """What a tool's handler works with during one call of ``anet mcp``.

    ``control`` calls the running daemon's control plane (an :class:`AsyncControlClient`; a
    daemon that is not running is an AnetError naming the data directory and ``anet up``).
    ``progress(message)`` sends an MCP progress notification to the host when it asked for
    them, and does nothing otherwise.
    """

    control: AsyncControlClient
    progress: Callable[[str], Awaitable[None]]


_TOOL_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


@dataclass(frozen=True)
class McpTool:
    """A tool ``anet mcp`` serves to MCP hosts (``anet_mcp_tools``).

    ``arguments`` is a pydantic model (``extra="forbid"``): its JSON schema is the tool's
    input schema, and a call's arguments are validated with it before ``run(arguments, call)``
    is awaited, so a wrong or unknown argument never reaches the handler. ``description`` is
    one line a language model can act on. The hints are the MCP tool annotations, with the
    spec's defaults: a host asks before a tool that is not ``read_only``. ``run`` raises
    :class:`AnetError` for what the user can fix; the host sees it as a tool error with the
    message and the hint.
    """

    name: str
    description: str
    arguments: type[BaseModel]
    run: Callable[[Any, McpCall], Awaitable[McpResult]]
    title: str = ""
    read_only: bool = False
    """readOnlyHint: the tool changes nothing."""
    destructive: bool = True
    """destructiveHint (when not read-only): it may undo or end something."""
    idempotent: bool = False
    """idempotentHint: calling it again with the same arguments changes nothing more."""
    open_world: bool = True
    """openWorldHint: it reaches other parties (the hub, other agents)."""
    module: str = field(kw_only=True)

    def __post_init__(self) -> None:
        if not _TOOL_NAME.match(self.name):
            raise ValueError(f"MCP tool names are snake_case (a-z, 0-9, _), got {self.name!r}")
        if "\n" in self.description.strip():
            raise ValueError(f"the description of the MCP tool {self.name} is one line")


@dataclass(frozen=True)
class KeyRotationStep:
    """What a module does once the node's keys rotated (``anet_key_rotated``).

    ``run`` is called with ``emergency`` (the recovery key revoked the old keys: whatever they
    protected may be known to someone else); it returns one sentence for the output of ``anet
    keys rotate``, or None when it had nothing to do.
    """

    module: str
    run: Callable[[bool], str | None]
