"""Hook implementations of the module x402."""

from __future__ import annotations

from typing import TYPE_CHECKING

from anet_core.api import CheckResult, CheckStatus, ConfigBlock, DoctorCheck, hookimpl

if TYPE_CHECKING:
    from anet_core.api import CheckContext

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
                        signer_state)]
