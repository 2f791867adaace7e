"""Hook implementations of the module a2a."""

from __future__ import annotations

import stat

from pydantic import BaseModel, ConfigDict

from anet_core import hookimpl
from anet_core.doctor import CheckContext
from anet_core.records import CheckResult, CheckStatus, ConfigBlock, DoctorCheck

MODULE = "a2a"


class A2AConfig(BaseModel):
    """``modules.a2a``: the interface needs no configuration; ``anet init`` writes no block."""

    model_config = ConfigDict(extra="forbid")


async def interface_state(ctx: CheckContext) -> CheckResult:
    state_dir = ctx.paths.module_dir(MODULE)
    conflict = state_dir / "a2a_port_conflict.txt"
    if conflict.exists():
        return CheckResult(CheckStatus.FAIL, conflict.read_text().strip().splitlines()[0],
                           hint="free the port, then `anet stop && anet up` and "
                                "`anet agents wire --refresh`")
    address = state_dir / "a2a_addr.txt"
    if not address.exists():
        return CheckResult(CheckStatus.WARN, "the local A2A interface has not started yet",
                           hint="start the node with `anet up`")
    token = state_dir / "a2a_token.txt"
    if token.exists() and stat.S_IMODE(token.stat().st_mode) & 0o077:
        return CheckResult(CheckStatus.FAIL, f"{token} is readable by other users",
                           hint=f"chmod 600 {token}")
    return CheckResult(CheckStatus.OK, f"address {address.read_text().strip()}")


@hookimpl
def anet_config_blocks() -> list[ConfigBlock]:
    return [ConfigBlock(module=MODULE, model=A2AConfig)]


@hookimpl
def anet_doctor_checks() -> list[DoctorCheck]:
    return [DoctorCheck("a2a-interface", MODULE,
                        "the local A2A interface is up on its recorded address", interface_state)]
