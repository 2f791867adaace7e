"""The core's doctor checks: configuration, data directory, secrets, identity, daemon."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import TYPE_CHECKING

from anet_core import hookimpl
from anet_core.records import CheckResult, CheckStatus, DoctorCheck

if TYPE_CHECKING:
    from anet_core.doctor import CheckContext

OK, WARN, FAIL = CheckStatus.OK, CheckStatus.WARN, CheckStatus.FAIL


async def config_valid(ctx: CheckContext) -> CheckResult:
    if not ctx.paths.config.exists():
        return CheckResult(WARN, f"{ctx.paths.config} does not exist",
                           hint="`anet init` writes one")
    ctx.config  # noqa: B018 - raises AnetError, which the runner reports with its hint
    return CheckResult(OK, f"{ctx.paths.config} is valid")


async def data_dir(ctx: CheckContext) -> CheckResult:
    root = ctx.paths.root
    if not root.exists():
        return CheckResult(FAIL, f"{root} does not exist", hint="run `anet init`")
    mode = stat.S_IMODE(root.stat().st_mode)
    if mode & 0o077:
        # Task contents (anet.db), logs and configuration are inside: nobody else's to read.
        return CheckResult(FAIL, f"{root} is open to other users (mode {mode:o})",
                           hint=f"chmod 700 {root} (`anet init` and `anet up` do it too)")
    return CheckResult(OK, f"{root} (mode {mode:o})")


def secret_files(root: Path) -> list[Path]:
    """Every file of the data directory that holds a secret."""
    patterns = ("identity/*.key", "control_token.txt", "modules/*/*token*.txt")
    return sorted(path for pattern in patterns for path in root.glob(pattern))


async def secrets_private(ctx: CheckContext) -> CheckResult:
    exposed = [path for path in secret_files(ctx.paths.root)
               if stat.S_IMODE(path.stat().st_mode) & 0o077]
    if exposed:
        return CheckResult(FAIL, f"{len(exposed)} secret file(s) readable by others",
                           detail="\n".join(map(str, exposed)),
                           hint="chmod 600 " + " ".join(map(str, exposed)))
    return CheckResult(OK, f"{len(secret_files(ctx.paths.root))} secret files, all mode 600")


async def identity_valid(ctx: CheckContext) -> CheckResult:
    from anet_core.identity import Identity

    if not ctx.paths.identity.exists():
        return CheckResult(FAIL, "the node has no identity yet", hint="run `anet init`")
    identity = Identity.load(ctx.paths.identity)
    return CheckResult(OK, f"AID {identity.aid}, key history verified "
                       f"({identity.key_seq + 1} key statement(s))")


async def daemon_running(ctx: CheckContext) -> CheckResult:
    status = await ctx.daemon_status()
    if status is None:
        return CheckResult(WARN, "the daemon is not running", hint="start it with `anet up`")
    down = [listener for listener in status["listeners"] if listener["state"] != "up"]
    if down:
        return CheckResult(WARN, f"running (pid {status['pid']}), listener(s) down: "
                           + ", ".join(listener["name"] for listener in down),
                           detail="\n".join(f"{listener['name']}: {listener['detail']}"
                                            for listener in down),
                           hint="see the module's own checks above")
    return CheckResult(OK, f"running (pid {status['pid']})")


@hookimpl
def anet_doctor_checks() -> list[DoctorCheck]:
    return [
        DoctorCheck("config-valid", "core", "config.json parses and every block validates",
                    config_valid),
        DoctorCheck("data-dir", "core", "the data directory exists and only you can enter it",
                    data_dir),
        DoctorCheck("secrets-private", "core", "every file with a secret is mode 600",
                    secrets_private),
        DoctorCheck("identity", "core", "the node's keys load and its key history verifies",
                    identity_valid),
        DoctorCheck("daemon", "core", "the daemon runs and all its listeners are up",
                    daemon_running),
    ]
