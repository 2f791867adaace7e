"""``anet doctor``'s ``a2a-publish``: the published aliases resolve to their backends and the
skills they name (asked of the running daemon), and the listener's bind posture. It loads none
of the listener's code."""

from __future__ import annotations

import asyncio
import ipaddress
from typing import Any

from anet_a2a.config import A2AConfig, PublishConfig
from anet_a2a.publish.tokens import PublishTokens
from anet_a2a.state import MODULE, StateDir
from anet_core.api import CheckContext, CheckResult, CheckStatus, DoctorCheck


def _exposed(config: PublishConfig) -> str:
    try:
        if ipaddress.ip_address(config.bind).is_loopback:
            return ""
    except ValueError:
        pass
    if config.public_base_url:
        return ""
    return (f"the listener binds {config.bind} with no public_base_url: anyone who reaches "
            "it reads the cards; see docs/publishing.md (bind posture)")


def doctor_checks(config: A2AConfig | None) -> list[DoctorCheck]:
    if config is None:
        return []
    publish = config.publish

    async def run(ctx: CheckContext) -> CheckResult:
        if not publish.enabled:
            return CheckResult(CheckStatus.SKIP, "publishing is off (modules.a2a.publish."
                                                 "enabled)")
        if ctx.daemon_status() is None:
            return CheckResult(CheckStatus.WARN, "the daemon is not running; the aliases are "
                                                 "resolved against the backends when it runs",
                               hint="start the node with `anet up`")
        found: dict[str, Any] = await asyncio.to_thread(ctx.daemon.get, "/a2a/publish")
        if not found["listening"]:
            return CheckResult(CheckStatus.FAIL, "publishing is enabled but nothing listens",
                               hint="see the daemon log: the address may be taken")
        aliases = ", ".join(f"{name} ({len(skills)} skills)"
                            for name, skills in found["aliases"].items()) or "none"
        warning = _exposed(publish)
        if found["problems"] or warning:
            return CheckResult(CheckStatus.WARN, f"{found['catalog']}: {aliases}",
                               detail="\n".join([*found["problems"], warning]).strip(),
                               hint="fix the names in modules.a2a.publish.aliases")
        tokens = len(PublishTokens(StateDir.of(ctx.paths).publish_tokens_file).all())
        return CheckResult(CheckStatus.OK, f"{found['catalog']}: {aliases}; {tokens} token(s)")

    return [DoctorCheck("a2a-publish", MODULE, "the published aliases resolve to their backends "
                        "and the skills they name", run)]
