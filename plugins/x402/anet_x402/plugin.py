"""Hook implementations of the module x402.

Each hook imports the code it hands to the core, and a command names its functions with
``lazy``: loading this module (every command of ``anet`` does) loads none of the module's code.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from anet_core.api import (
    CheckResult,
    CheckStatus,
    CliCommand,
    ConfigBlock,
    ControlRoutes,
    DoctorCheck,
    hookimpl,
    lazy,
)

if TYPE_CHECKING:
    from anet_core.api import (
        CheckContext,
        EndingTask,
        InboundTask,
        Lifespan,
        Node,
        SkillSource,
        TaskGate,
    )

MODULE = "x402"


async def signer_state(ctx: CheckContext) -> CheckResult:
    from anet_x402.config import X402Config

    ctx.config.module(MODULE, X402Config)
    return CheckResult(CheckStatus.SKIP, "this version signs no payments",
                       hint="priced skills stay in input-required for the operator")


@hookimpl
def anet_config_blocks() -> list[ConfigBlock]:
    from anet_x402.config import X402Config  # pydantic: loaded only where config.json is read

    return [ConfigBlock(module=MODULE, model=X402Config)]


@hookimpl
def anet_doctor_checks() -> list[DoctorCheck]:
    return [DoctorCheck("x402-signer", MODULE, "the node can sign and settle payments now",
                        signer_state),
            DoctorCheck("x402-credit", MODULE, "credit at the home hub's rail",
                        lazy("anet_x402.balance:credit_check")),
            DoctorCheck("x402-prices", MODULE, "the prices are valid and each priced skill has "
                                               "a rail the node can reach",
                        lazy("anet_x402.provider_checks:prices_reachable"))]


@hookimpl
def anet_routes(node: Node) -> list[ControlRoutes]:
    from anet_x402 import balance

    return [ControlRoutes(module=MODULE, routes=[*balance.routes])]


@hookimpl
def anet_cli_commands() -> list[CliCommand]:
    return [CliCommand("balance", "this node's credit at its home hub's payment rail",
                       lazy("anet_x402.balance_cli:configure_balance"),
                       lazy("anet_x402.balance_cli:run_balance"), module=MODULE)]


@hookimpl
def anet_lifespan(node: Node) -> list[Lifespan]:
    from anet_x402 import provider_hooks

    return [provider_hooks.payee_lifespan(node)]


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
