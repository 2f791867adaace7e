"""``anet publish token add|list|revoke|rotate``: on the token file directly, with or without
the daemon (the listener reads the file again when it changes, so a revoked token is refused from
the next request on). They load none of the daemon's code."""

from __future__ import annotations

import argparse
from datetime import UTC, datetime

from anet_a2a.publish.tokens import PublishTokens
from anet_a2a.state import StateDir
from anet_core.api import CliContext


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
