"""``anet agents peers``: the direct peers as the running daemon reads them (``/a2a/peers``).
It loads none of the daemon's code."""

from __future__ import annotations

import argparse

from anet_core.api import CliContext


def run_list(args: argparse.Namespace, ctx: CliContext) -> int:
    peers = ctx.daemon.get("/a2a/peers")["peers"]
    if args.json:
        ctx.print_json(peers)
        return 0
    if not peers:
        print("No direct peers. modules.a2a.peers in config.json names them (docs/a2a.md).")
    for peer in peers:
        tags = f"  [{', '.join(peer['tags'])}]" if peer["tags"] else ""
        print(f"{peer['name']}  {peer['baseUrl']}{tags}")
        if peer["error"]:
            print(f"    error: {peer['error']}")
        for agent in peer["agents"]:
            tls = "tls" if agent["tls"] else "no tls"
            print(f"    {agent['id']:<32} {tls}, card signature {agent['signature']}  "
                  f"{agent['name']}")
    return 0


def configure_list(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")
