"""Every hook of anet. A module implements any subset of them with ``@anet_core.hookimpl``.

Hooks are called with keyword arguments; an implementation may accept fewer parameters than its
spec. Hooks return typed records from :mod:`anet_core.records` and the core runs them, so an
implementation does no I/O itself and one module's failure never stops another's checks.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pluggy

from anet_core import PROJECT

if TYPE_CHECKING:
    from anet_core.config import Config
    from anet_core.identity import Identity
    from anet_core.link import PeerInfo
    from anet_core.node import Node
    from anet_core.records import (
        BackendKind,
        CancelCheck,
        CardExtension,
        CliCommand,
        ConfigBlock,
        ControlRoutes,
        DirectorySource,
        DoctorCheck,
        EndingTask,
        InboundTask,
        KeyRotationStep,
        Lifespan,
        McpTool,
        PolicyVeto,
        RequesterTurn,
        SkillSource,
        TaskClaim,
        TaskGate,
        TurnHandler,
    )
    from anet_core.settings import DataPaths
    from anet_core.tasks.policy import InboundPolicy

hookspec = pluggy.HookspecMarker(PROJECT)


@hookspec
def anet_config_blocks() -> list[ConfigBlock]:
    """Declare the blocks of config.json this module owns.

    Called once when the configuration is loaded, before the node exists. Each block
    ``modules.<module>`` is validated by its model (``extra="forbid"``); a block for a module
    that is not installed is refused with the command that installs it.

    Example::

        class GreeterConfig(BaseModel):
            model_config = ConfigDict(extra="forbid")
            greeting: str = "hello"

        @hookimpl
        def anet_config_blocks():
            return [ConfigBlock(module="greeter", model=GreeterConfig)]
    """


@hookspec
def anet_lifespan(node: Node) -> list[Lifespan]:
    """Declare resources and background loops that live as long as the daemon.

    Called once at daemon start, after the core services of ``node`` exist. The core enters the
    context managers in order and exits them in reverse order at shutdown; a context that fails
    to enter stops the start and the ones already entered are closed.

    Example::

        @hookimpl
        def anet_lifespan(node):
            @asynccontextmanager
            async def ticker():
                task = asyncio.create_task(tick_forever(node))
                yield
                task.cancel()
            return [Lifespan(name="greeter-ticker", open=ticker, module="greeter")]
    """


@hookspec
def anet_routes(node: Node) -> list[ControlRoutes]:
    """Add routes to the control plane (loopback, control token), mounted at ``/<module>/``.

    Called once at daemon start, before the control plane starts listening. The CLI reaches the
    daemon only through these routes.

    Example::

        routes = web.RouteTableDef()

        @routes.get("/hello")
        async def hello(request):
            return web.json_response({"hello": "world"})

        @hookimpl
        def anet_routes(node):
            return [ControlRoutes(module="greeter", routes=list(routes))]
    """


@hookspec
def anet_doctor_checks(config: Config | None) -> list[DoctorCheck]:
    """Declare health checks for ``anet doctor``.

    Called by the doctor with the validated configuration (None when config.json is invalid:
    the core's own check reports that), so a module can declare one check per configured item.
    The core runs every check concurrently, each with its own timeout and error isolation, and
    prints the results. A check receives a :class:`anet_core.doctor.CheckContext` (settings,
    configuration, the running daemon if any).

    Example::

        async def greeting_set(ctx):
            block = ctx.config.module("greeter")
            if block.greeting:
                return CheckResult(CheckStatus.OK, "greeting is set")
            return CheckResult(CheckStatus.WARN, "greeting is empty",
                               hint="set modules.greeter.greeting")

        @hookimpl
        def anet_doctor_checks():
            return [DoctorCheck(name="greeter-greeting", module="greeter",
                                summary="the greeting is set", run=greeting_set)]
    """


@hookspec
def anet_cli_commands() -> list[CliCommand]:
    """Add subcommands to ``anet``.

    Called once when the CLI starts. A name already taken by another module is an error that
    names both modules.

    Example::

        def run_hello(args, ctx):
            print(f"hello {args.who}")
            return 0

        @hookimpl
        def anet_cli_commands():
            return [CliCommand(name="hello", help="say hello",
                               configure=lambda p: p.add_argument("who"), run=run_hello,
                               module="greeter")]
    """


@hookspec(firstresult=True)
def anet_take_task(node: Node, task: InboundTask) -> TaskClaim | None:
    """Decide who serves an inbound task.

    Called by the task layer for each new task the inbound policy does not refuse outright, in
    hook order; stops at the first non-None result. Return a :class:`TaskClaim` to serve the
    task, or None to leave it to the next module; the core awaits ``claim.serve(task,
    responder)`` with a :class:`~anet_core.records.Responder` of the task layer. When no module
    claims it, the task waits in the operator's inbox (``anet inbox``), except a task of a peer
    that is not on the trust list (``task.trusted`` False) under the policy ``trusted``: it is
    rejected (``not_trusted``). So claim an untrusted peer's task only when serving strangers is
    safe. Also called with the
    requester's answer (``task.continued``) on a task waiting for input whose module stopped
    serving it when the daemon restarted; unclaimed, that answer goes to the inbox.

    Example::

        @hookimpl
        def anet_take_task(node, task):
            if task.skill != "greet" or not task.trusted:
                return None

            async def serve(task, responder):
                await responder.complete("hello")

            return TaskClaim(module="greeter", serve=serve)
    """


@hookspec(firstresult=True)
def anet_task_gate(node: Node, task: InboundTask) -> TaskGate | None:
    """Hold an inbound task back until its requester meets a condition (module x402: a payment).

    Called by the task layer inside the transaction that receives the message (so no I/O), in
    hook order, stopping at the first non-None result: for each new network or local task the
    policy does not refuse (a stranger's task under ``trusted`` that no module would claim is
    refused first, and hears nothing of the gate), before ``anet_take_task``; and for each
    answer on a task that waits for input and that no module serves at this moment
    (``task.continued`` True, ``task.question`` the status message it answers). None lets the
    task go on as usual. A :class:`TaskGate` gives its :class:`GateVerdict` at once
    (``verdict``) or through ``check``, awaited after the commit. PASS hands the task on, with
    its first message and request metadata, to ``anet_take_task`` or the inbox (the trust rule
    of ``anet_take_task`` applies then), and the task's end is offered to
    ``anet_task_ending``; HOLD makes it wait for input with the verdict's message; FAIL ends
    it; CANCEL ends it canceled (the requester withdrew what the gate waited for). An answer
    the daemon received but had not decided when it stopped is offered again when the node
    takes tasks again.

    Example::

        @hookimpl
        def anet_task_gate(node, task):
            if task.skill != "greet":
                return None
            if not task.continued:
                return TaskGate(module="greeter", verdict=GateVerdict(
                    GateAction.HOLD, "Say the password first."))

            async def check():
                if await password_ok(task.message):
                    return GateVerdict(GateAction.PASS)
                return GateVerdict(GateAction.FAIL, "Wrong password.")

            return TaskGate(module="greeter", check=check)
    """


@hookspec(firstresult=True)
def anet_task_ending(node: Node, task: EndingTask) -> TaskGate | None:
    """Act on the end of a task a module's gate admitted, before that end is committed.

    Called by the task layer when a task that ``anet_task_gate`` passed reaches a terminal
    state from a module (its responder) or the operator (``anet reply``, ``anet reject``), not
    from the requester's cancel; ``task.gate`` names the module whose gate admitted it. The
    core awaits the gate's ``check`` (or takes its ``verdict``): PASS commits the end, with the
    verdict message's metadata joined to the final status message; FAIL ends the task as
    failed instead, artifacts withheld; CANCEL ends it canceled (``canceled_by_requester``),
    artifacts withheld; HOLD defers the end (the task stays as it is) until the module gives it
    again with ``node.tasks.end_received``. A failing check ends the task as failed. Module
    x402 settles the payment here and adds the receipts (and ends the task canceled when the
    rail answers that the payer voided the payment).

    Example::

        @hookimpl
        def anet_task_ending(node, task):
            if task.gate != "greeter":
                return None
            return TaskGate(module="greeter", verdict=GateVerdict(
                GateAction.PASS, {"parts": [{"text": "done"}],
                                  "metadata": {"greeter.greeted": True}}))
    """


@hookspec
def anet_card_extensions(node: Node, peer: PeerInfo) -> list[CardExtension]:
    """Declare A2A extensions on the proxy card of a remote agent (local A2A endpoint).

    Called each time the a2a module builds the proxy card of ``peer`` (a directory entry this
    node checked), so the answer may change from one request to the next: declare an extension
    only while the node can honour it now. The a2a module adds every record to
    ``capabilities.extensions`` before it signs the card; it imports no other module.

    Example::

        @hookimpl
        def anet_card_extensions(node, peer):
            if not (peer.card and peer.card.get("charge") != "free" and can_pay_now(node)):
                return []
            return [CardExtension(module="x402", uri=X402_EXTENSION_URI,
                                  description="The node signs and settles payments")]
    """


@hookspec
def anet_backend_kinds() -> list[BackendKind]:
    """Declare kinds of backend: how the backends module reaches a backend ``url`` scheme.

    Called once when the backends module starts, and by ``anet doctor``. Each configured backend
    is served by the kind that lists its url's scheme; two kinds claiming one scheme is an error
    that names both modules. The built-in kind ``a2a`` takes ``unix``, ``http`` and ``https``
    (A2A 1.0 JSON-RPC). A kind's channel yields A2A stream events; the backends module applies
    the trust rules, retries, mapping and evidence around it.

    Example::

        @asynccontextmanager
        async def open_echo(target):
            class Echo:
                async def send(self, message, metadata, *, blocking=False):
                    text = message["parts"][0]["text"]
                    yield {"message": {"messageId": uuid4().hex, "role": "ROLE_AGENT",
                                       "parts": [{"text": text}]}}

                async def cancel(self, task_id):
                    pass
            yield Echo()

        @hookimpl
        def anet_backend_kinds():
            return [BackendKind(name="echo", schemes=("echo",), open=open_echo, module="echo")]
    """


@hookspec
def anet_policy_veto(node: Node, policy: InboundPolicy) -> PolicyVeto | None:
    """Refuse an inbound policy (``InboundPolicy.CLOSED``, ``TRUSTED`` or ``OPEN``) the module
    cannot live with.

    Called by the task layer before ``anet policy set`` changes the policy; every module is
    asked, and any :class:`PolicyVeto` keeps the old policy and is shown to the operator (its
    reason should name the configuration key that forbids the policy). Return None to allow it.
    A module checks the policy already set when it starts (its ``anet_lifespan``), because the
    configuration may have changed while the daemon was down.

    Example::

        @hookimpl
        def anet_policy_veto(node, policy):
            if policy is InboundPolicy.OPEN and node.config.module("greeter").strangers_welcome:
                return PolicyVeto(module="greeter",
                                  reason="modules.greeter.strangers_welcome is set",
                                  hint="unset it, or keep the policy trusted")
            return None
    """


@hookspec
def anet_card_skills(node: Node) -> list[SkillSource]:
    """Offer skills for the node's network card, besides the ``node.skills`` of config.json.

    Called by the hub link before every publication of the card (after each registration, and
    when a periodic refresh finds the skills changed). The core awaits each source's ``read``
    with a timeout and leaves out one that fails; a skill whose id config.json already lists
    keeps the configured entry.
    ``SkillSource.prices`` names the card's skills the module charges for: the card's ``charge``
    is derived from them (free, partial, paid).

    Example::

        @hookimpl
        def anet_card_skills(node):
            async def read():
                return [{"id": "greet", "name": "Greet", "description": "Says hello",
                         "tags": ["greeting"]}]
            return [SkillSource(module="greeter", read=read)]
    """


@hookspec
def anet_mcp_tools() -> list[McpTool]:
    """Add tools to the MCP server of ``anet mcp`` (module mcp), served beside its own.

    Called once when ``anet mcp`` starts, in that process, not in the daemon: a tool reaches
    the node through the control plane (``call.control``, routes a module adds with
    ``anet_routes``) and reports progress with ``call.progress``. Tool names are unique (two
    tools of one name stop ``anet mcp`` with an error naming both modules), so start them with
    the module's name; the module mcp's own tools are listed first. The core does not import
    the MCP SDK: the module mcp turns the records into MCP tools, validates the arguments with
    ``McpTool.arguments`` and presents errors.

    Example::

        class GreetArguments(BaseModel):
            model_config = ConfigDict(extra="forbid")
            who: str = Field(description="whom to greet")

        async def greet(arguments, call):
            await call.progress("asking the node")
            hello = await call.control.get("/greeter/hello")
            return McpResult(text=f"{hello['hello']}, {arguments.who}", data=hello)

        @hookimpl
        def anet_mcp_tools():
            return [McpTool(name="greeter_greet", description="Greet someone through the node",
                            arguments=GreetArguments, run=greet, read_only=True,
                            open_world=False, module="greeter")]
    """


@hookspec
def anet_directory_sources(node: Node) -> list[DirectorySource]:
    """Add agents the hub does not know to the node's directory listing (``anet agents``).

    Called by the control route ``GET /tasks/agents`` for each first page (no cursor): the core
    awaits every source's ``list`` with the listing's filters and a timeout, marks each entry
    with ``"source": module`` and shows the entries after the hub's. A source that fails or
    times out is left out and logged; the listing never fails for it. When the hub cannot be
    asked (not joined, unreachable), the modules' entries are shown with the hub's error.

    Example::

        @hookimpl
        def anet_directory_sources(node):
            async def listed(search):
                agents = [{"aid": "greeter@lan", "name": "Greeter", "description": "",
                           "skills": [], "url": "http://greeter.lan/a2a"}]
                return [agent for agent in agents
                        if not search.q or search.q.lower() in agent["name"].lower()]
            return [DirectorySource(module="greeter", list=listed)]
    """


@hookspec
def anet_key_rotated(paths: DataPaths, identity: Identity) -> list[KeyRotationStep]:
    """Act on a rotation of the node's keys, at once rather than at the next start.

    Called by ``anet keys rotate`` right after the rotation: in the daemon when it runs (with
    its identity, already rotated), else in the command itself. The core runs each step's
    ``run(emergency)`` and prints the sentences it returns; a step that fails is reported and
    the others still run. After an emergency rotation, a module replaces every secret the old
    keys may have exposed.

    Example::

        @hookimpl
        def anet_key_rotated(paths, identity):
            def run(emergency):
                if not emergency:
                    return None
                (paths.module_dir("greeter") / "session.txt").unlink(missing_ok=True)
                return "greeter: sessions dropped after the emergency rotation"
            return [KeyRotationStep(module="greeter", run=run)]
    """


@hookspec(firstresult=True)
def anet_requester_waiting(node: Node, turn: RequesterTurn) -> TurnHandler | None:
    """Act on a task this node sent when the remote agent asks for input, before the client
    hears of it.

    Called by the task layer each time an update of the agent puts a requester task into
    input-required (and, when the daemon starts, for every requester task still waiting for
    input, so that a turn a crash interrupted is finished then), in hook order; stops at the
    first non-None result. ``turn.message`` is None. The core awaits ``handler.run(turn)``,
    one turn per task at a time, and only then publishes the agent's question to the client's
    streams: an answer that ``send``s a message continues the task at once (the client sees
    it move on), one that ``hold``s publishes the task with its reason and status message.
    Return None when the question is none of the module's business. Module x402 pays a quote
    within the automatic tier here (docs/payments.md).

    Example::

        @hookimpl
        def anet_requester_waiting(node, turn):
            question = turn.task["status"].get("message") or {}
            if question.get("metadata", {}).get("greeter.asks") != "name":
                return None

            async def run(turn):
                return TurnAnswer(send={"messageId": f"name-{turn.task_id}", "role": "ROLE_USER",
                                        "parts": [{"text": "Ada"}]})
            return TurnHandler(module="greeter", run=run)
    """


@hookspec(firstresult=True)
def anet_requester_answer(node: Node, turn: RequesterTurn) -> TurnHandler | None:
    """Act on a client's answer to a task this node sent that waits for input, before it is
    forwarded.

    Called by the task layer for a message that continues a requester task in input-required
    (not for a repeated message, which is answered with the existing task, nor for one a
    module sends itself), and for the first message of a new task (``turn.task`` is then the
    task as it will be stored, submitted, nothing sent yet), in hook order; stops at the first
    non-None result. ``turn.message`` and ``turn.metadata`` are the client's. The core awaits
    ``handler.run(turn)``, one turn per task at a time: an answer that ``send``s forwards that
    message instead of the client's (under the client's ``messageId``, so a repeat is still
    recognised; not for a new task, whose first message is the client's); one that ``hold``s
    sends nothing and the client gets the task, still waiting, with the reason — a new task
    is rejected instead, with that reason and status message. Module x402 signs a submitted
    payment here and refuses a client's own payload (docs/payments.md).

    Example::

        @hookimpl
        def anet_requester_answer(node, turn):
            text = turn.message["parts"][0].get("text", "")
            if "password" not in text.lower():
                return None

            async def run(turn):
                return TurnAnswer(hold=Reason.REJECTED_BY_POLICY)
            return TurnHandler(module="greeter", run=run)
    """


@hookspec(firstresult=True)
def anet_requester_cancel(node: Node, turn: RequesterTurn) -> CancelCheck | None:
    """Have a say on the client's cancel of a task this node sent, before it takes effect.

    Called by the task layer for each cancel of an open requester task (``CancelTask`` on the
    local A2A endpoint, the MCP tool ``cancel_task``), and before the node gives up on a task
    that went silent (``no_response``: a refusal keeps it waiting another
    ``no_response_after``), in hook order, stopping at the first non-None result;
    ``turn.message`` is None. The core awaits ``check.run(turn)`` with no other
    turn of the task running (so no payment is signed meanwhile), then: a
    :class:`CancelVerdict` with ``refused`` leaves the task going on and answers the client
    TaskNotCancelableError with that reason; without, the cancel takes effect (the task ends
    here, the agent is asked to stop). A run that raises refuses the cancel: nothing that
    cannot be undone happens on a guess. Module x402 voids the task's payment at its rail
    here, and refuses the cancel when the rail had settled it (docs/payments.md).

    Example::

        @hookimpl
        def anet_requester_cancel(node, turn):
            if turn.task["metadata"].get("greeter.booking") is None:
                return None

            async def run(turn):
                if await booking_confirmed(turn.task_id):
                    return CancelVerdict(refused="booking-confirmed",
                                         message="the booking is confirmed",
                                         hint="ask the agent to undo it")
                return CancelVerdict(evidence=(("greeter.unbooked", {"taskId": turn.task_id}),))
            return CancelCheck(module="greeter", run=run)
    """


@hookspec
def anet_requester_ended(node: Node, turn: RequesterTurn) -> list[tuple[str, dict[str, Any]]]:
    """Keep evidence of how the agent ended a task this node sent.

    Called by the task layer inside the transaction that applies the agent's terminal update
    (also when the task had already ended here, by a cancel or ``no_response``), for every
    module; ``turn.task`` is the task with the agent's final status, ``turn.message`` None.
    Returns evidence records ``(kind, data)`` the core keeps with that change, so the record and
    the end survive a crash together. No I/O beyond reading the node's own small files; a hook
    that raises is logged and records nothing. Module x402 records the payment's receipt here
    (``payment.receipt``, the hub's settlement checked), so that the payer's chain holds what it
    paid for as the payee's does (docs/payments.md).

    Example::

        @hookimpl
        def anet_requester_ended(node, turn):
            booking = (turn.task["status"].get("message") or {}).get("metadata", {}).get(
                "greeter.booking")
            return [] if booking is None else [("greeter.booked", {"taskId": turn.task_id,
                                                                   "booking": booking})]
    """
