"""Hook implementations of the module x402."""

from __future__ import annotations

from anet_core.api import (
    CheckContext,
    CheckResult,
    CheckStatus,
    ConfigBlock,
    DoctorCheck,
    hookimpl,
)
from anet_x402.config import X402Config

MODULE = "x402"


async def signer_state(ctx: CheckContext) -> CheckResult:
    ctx.config.module(MODULE, X402Config)
    return CheckResult(CheckStatus.SKIP, "this version signs no payments",
                       hint="priced skills stay in input-required for the operator")


@hookimpl
def anet_config_blocks() -> list[ConfigBlock]:
    return [ConfigBlock(module=MODULE, model=X402Config)]


@hookimpl
def anet_doctor_checks() -> list[DoctorCheck]:
    return [DoctorCheck("x402-signer", MODULE, "the node can sign and settle payments now",
                        signer_state)]
