"""``anet doctor`` checks of the local A2A interface: up, its address, port conflict, token mode."""

from __future__ import annotations

import stat

from anet_a2a.state import MODULE, StateDir
from anet_core.api import CheckContext, CheckResult, CheckStatus

REMEDY = "free the port, then `anet stop && anet up` and `anet agents wire --refresh`"


async def interface_state(ctx: CheckContext) -> CheckResult:
    state = StateDir.of(ctx.paths)
    if state.conflict_file.exists():
        text = state.conflict_file.read_text(encoding="utf-8")
        return CheckResult(CheckStatus.FAIL, text.splitlines()[0], detail=text.strip(),
                           hint=REMEDY)
    if not state.address_file.exists():
        return CheckResult(CheckStatus.WARN, "the local A2A interface has not started yet",
                           hint="start the node with `anet up`")
    address = state.address_file.read_text(encoding="ascii").strip()
    status = await ctx.daemon_status()
    if status is None:
        return CheckResult(CheckStatus.WARN, f"down (the daemon is not running); address "
                           f"{address}", hint="start the node with `anet up`")
    listener = next((item for item in status["listeners"] if item["name"] == MODULE), None)
    if listener is None:
        return CheckResult(CheckStatus.FAIL, f"the daemon runs but the interface did not start; "
                           f"address {address}", hint="see the daemon log for why")
    if listener["state"] != "up":
        return CheckResult(CheckStatus.FAIL, f"down: {listener['detail']}", hint=REMEDY)
    return CheckResult(CheckStatus.OK, f"up at http://{listener['address']}/a2a/v1/agents")


async def token_mode(ctx: CheckContext) -> CheckResult:
    token = StateDir.of(ctx.paths).token_file
    if not token.exists():
        return CheckResult(CheckStatus.WARN, f"{token} does not exist yet",
                           hint="start the node with `anet up`")
    mode = stat.S_IMODE(token.stat().st_mode)
    if mode & 0o077:
        return CheckResult(CheckStatus.FAIL, f"{token} is readable by other users (mode {mode:o})",
                           hint=f"chmod 600 {token}, then `anet a2a rotate-token`")
    return CheckResult(CheckStatus.OK, f"{token} (mode {mode:o})")
