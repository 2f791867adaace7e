"""Hook implementations of the module x402.

Each hook imports the code it hands to the core, and commands and checks name their functions
with ``lazy``: loading this module (every command of ``anet`` does) loads none of the module's
code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from anet_core.api import (
    CliCommand,
    ConfigBlock,
    ControlRoutes,
    DoctorCheck,
    Lifespan,
    hookimpl,
    lazy,
)

if TYPE_CHECKING:
    from anet_core.api import (
        CancelCheck,
        CardExtension,
        EndingTask,
        InboundTask,
        McpTool,
        Node,
        PeerInfo,
        RequesterTurn,
        SkillSource,
        TaskGate,
        TurnHandler,
    )

MODULE = "x402"


@hookimpl
def anet_config_blocks() -> list[ConfigBlock]:
    from anet_x402.config import X402Config  # pydantic: loaded only where config.json is read

    return [ConfigBlock(module=MODULE, model=X402Config)]


@hookimpl
def anet_lifespan(node: Node) -> list[Lifespan]:
    from anet_x402 import provider_hooks
    from anet_x402.signer_service import signing_service

    return [provider_hooks.payee_lifespan(node),
            Lifespan(name="x402-signer", open=lambda: signing_service(node), module=MODULE)]


@hookimpl
def anet_doctor_checks() -> list[DoctorCheck]:
    return [DoctorCheck("x402-tiers", MODULE, "the spending tiers, and today's spend against "
                        "agent_daily_max", lazy("anet_x402.payer_checks:tiers_state")),
            DoctorCheck("x402-credit", MODULE, "credit at the home hub's rail",
                        lazy("anet_x402.payer_checks:credit_check")),
            DoctorCheck("x402-prices", MODULE, "the prices are valid and each priced skill has "
                                               "a rail the node can reach",
                        lazy("anet_x402.provider_checks:prices_reachable")),
            DoctorCheck("x402-reconcile", MODULE, "the evidence chain against the hub's ledger",
                        lazy("anet_x402.payer_checks:reconcile_check"), timeout=20.0)]


@hookimpl
def anet_routes(node: Node) -> list[ControlRoutes]:
    from anet_x402 import balance, reconcile, signer_routes

    return [ControlRoutes(module=MODULE, routes=[*balance.routes, *reconcile.routes,
                                                 *signer_routes.routes])]


@hookimpl
def anet_cli_commands() -> list[CliCommand]:
    return [CliCommand("balance", "this node's credit at its home hub's payment rail",
                       lazy("anet_x402.balance_cli:configure_balance"),
                       lazy("anet_x402.balance_cli:run_balance"), module=MODULE),
            CliCommand("pay", "pay a task's quote as the operator (shows it, asks)",
                       lazy("anet_x402.pay_cli:configure"), lazy("anet_x402.pay_cli:run"),
                       module=MODULE)]


@hookimpl
def anet_mcp_tools() -> list[McpTool]:
    from anet_x402.mcp_tools import x402_tools

    return x402_tools()


@hookimpl
def anet_card_skills(node: Node) -> list[SkillSource]:
    from anet_x402 import provider_hooks

    return provider_hooks.priced_skills(node)


@hookimpl
def anet_task_gate(node: Node, task: InboundTask) -> TaskGate | None:
    from anet_x402 import provider_hooks

    return provider_hooks.gate(node, task)


@hookimpl
def anet_task_ending(node: Node, task: EndingTask) -> TaskGate | None:
    from anet_x402 import provider_hooks

    return provider_hooks.ending(node, task)


@hookimpl
def anet_requester_waiting(node: Node, turn: RequesterTurn) -> TurnHandler | None:
    from anet_x402.signer_service import waiting_handler

    return waiting_handler(node, turn)


@hookimpl
def anet_requester_answer(node: Node, turn: RequesterTurn) -> TurnHandler | None:
    from anet_x402.signer_service import answer_handler

    return answer_handler(node, turn)


@hookimpl
def anet_requester_cancel(node: Node, turn: RequesterTurn) -> CancelCheck | None:
    from anet_x402.signer_service import cancel_check

    return cancel_check(node, turn)


@hookimpl
def anet_requester_ended(node: Node, turn: RequesterTurn) -> list[tuple[str, dict[str, Any]]]:
    from anet_x402.signer_service import receipt_records

    return receipt_records(node, turn)


@hookimpl
def anet_card_extensions(node: Node, peer: PeerInfo) -> list[CardExtension]:
    from anet_x402.signer_service import card_extensions

    return card_extensions(node, peer)
