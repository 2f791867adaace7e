"""Hook implementations of the module x402."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict

from anet_core.api import (
    CheckContext,
    CheckResult,
    CheckStatus,
    ConfigBlock,
    DoctorCheck,
    hookimpl,
)

MODULE = "x402"


class X402Config(BaseModel):
    """``modules.x402``: this version has no keys (docs/configuration.md)."""

    model_config = ConfigDict(extra="forbid")


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
