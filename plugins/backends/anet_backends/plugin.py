"""Hook implementations of the module backends."""

from __future__ import annotations

from anet_backends.config import BackendsConfig
from anet_core import hookimpl
from anet_core.doctor import CheckContext
from anet_core.records import CheckResult, CheckStatus, ConfigBlock, DoctorCheck

MODULE = "backends"


async def backends_configured(ctx: CheckContext) -> CheckResult:
    config = ctx.config.module(MODULE, BackendsConfig)
    if not config.backends:
        return CheckResult(CheckStatus.OK, "no backend configured: accepted tasks wait in the "
                           "inbox for the operator")
    return CheckResult(CheckStatus.OK, f"{len(config.backends)} backend(s) configured: "
                       + ", ".join(f"{b.match} → {b.url}" for b in config.backends))


@hookimpl
def anet_config_blocks() -> list[ConfigBlock]:
    # The seed documents the keys inside modules.a2a; they belong to this module.
    return [ConfigBlock(module=MODULE, model=BackendsConfig, also_read_from=("a2a",))]


@hookimpl
def anet_doctor_checks() -> list[DoctorCheck]:
    return [DoctorCheck("backends-config", MODULE, "the backends block is valid",
                        backends_configured)]
