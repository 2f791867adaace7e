"""``anet balance``: the node's credit at its home hub's rail, as the daemon's control route
``GET /x402/balance`` (anet_x402.balance) asks it."""

from __future__ import annotations

import argparse

from anet_core.api import CliContext

MODULE = "x402"
CREDIT_HINT = "the hub's operator adds credit: `anet hub credit {aid} <amount> --data <hub dir>`"


def configure_balance(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


def run_balance(args: argparse.Namespace, ctx: CliContext) -> int:
    found = ctx.daemon.get(f"/{MODULE}/balance")
    if args.json:
        ctx.print_json(found)
        return 0
    print(f"Credit of {found['aid']} at the rail of hub {found['hub']} ({found['railUrl']}):")
    if not found["balances"]:
        print("  none. " + CREDIT_HINT.format(aid=found["aid"]))
    for asset, amount in sorted(found["balances"].items()):
        print(f"  {amount} {asset}")
    return 0
