"""Publishing on the command line (``anet publish token ...``), on the control plane
(``/a2a/publish``) and in ``anet doctor`` (``a2a-publish``).

Token commands work on the token file directly, with or without the daemon: the listener reads
the file again when it changes, so a revoked token is refused from the next request on.
"""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
from datetime import UTC, datetime
from typing import Any

from aiohttp import web

from anet_a2a.config import A2AConfig, PublishConfig
from anet_a2a.publish.cards import CATALOG_PATH
from anet_a2a.publish.server import PUBLISHED
from anet_a2a.publish.tokens import PublishTokens
from anet_a2a.state import MODULE, StateDir
from anet_core.api import NODE_KEY, CheckContext, CheckResult, CheckStatus, CliContext, DoctorCheck


def _tokens(ctx: CliContext) -> PublishTokens:
    return PublishTokens(StateDir.of(ctx.paths).publish_tokens_file)


def run_add(args: argparse.Namespace, ctx: CliContext) -> int:
    token = _tokens(ctx).add(args.name, args.aliases)
    scope = ", ".join(args.aliases) if args.aliases else "every published alias"
    print(token)
    print(f"# token {args.name!r} for {scope}: shown this once, only its hash is kept",
          flush=True)
    return 0


def run_rotate(args: argparse.Namespace, ctx: CliContext) -> int:
    print(_tokens(ctx).rotate(args.name))
    print(f"# token {args.name!r} replaced: the old one is refused from the next request on")
    return 0


def run_revoke(args: argparse.Namespace, ctx: CliContext) -> int:
    _tokens(ctx).revoke(args.name)
    print(f"revoked    {args.name}: refused from the next request on")
    return 0


def run_list(args: argparse.Namespace, ctx: CliContext) -> int:
    tokens = [{"name": token.name, "aliases": list(token.aliases),
               "createdAt": datetime.fromtimestamp(token.created_at, UTC).isoformat(
                   timespec="seconds")} for token in _tokens(ctx).all()]
    if args.json:
        ctx.print_json(tokens)
        return 0
    if not tokens:
        print("No tokens. `anet publish token add <name>` makes one.")
    for token in tokens:
        scope = ", ".join(token["aliases"]) or "all aliases"
        print(f"{token['name']:<24} {token['createdAt']}  {scope}")
    return 0


def configure_add(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="who holds the token (shown to the backend)")
    parser.add_argument("--alias", dest="aliases", action="append", default=[],
                        metavar="ALIAS", help="limit the token to this alias (repeatable)")


def configure_name(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("name", help="the token's name")


def configure_list(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


async def publish_state(request: web.Request) -> web.Response:
    surface = request.config_dict[NODE_KEY].get(PUBLISHED)
    if surface is None:
        return web.json_response({"listening": False})
    state = await surface.aliases.state()
    return web.json_response({
        "listening": True, "baseUrl": surface.base, "catalog": surface.base + CATALOG_PATH,
        "aliases": {name: [skill["id"] for skill in alias.skills]
                    for name, alias in state.published.items()},
        "problems": state.problems})


def routes() -> list[web.RouteDef]:
    return [web.get("/publish", publish_state)]


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
