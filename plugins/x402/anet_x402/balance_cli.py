"""``anet balance``: the node's credit at its home hub's rail, as the daemon's control route
``GET /x402/balance`` (anet_x402.balance) asks it; with ``--reconcile``, the node's evidence
chain against the hub's ledger (``GET /x402/reconcile``, anet_x402.reconcile)."""

from __future__ import annotations

import argparse
from typing import Any

from anet_core.api import CliContext

MODULE = "x402"
CREDIT_HINT = "the hub's operator adds credit: `anet hub credit {aid} <amount> --data <hub dir>`"


def configure_balance(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--reconcile", action="store_true",
                        help="compare this node's evidence chain with the hub's ledger and "
                             "name every difference")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run_balance(args: argparse.Namespace, ctx: CliContext) -> int:
    if args.reconcile:
        reconciled = ctx.daemon.get(f"/{MODULE}/reconcile")
        if args.json:
            ctx.print_json(reconciled)
            return 1 if reconciled["differences"] else 0
        return print_reconciled(reconciled)
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


def print_reconciled(found: dict[str, Any]) -> int:
    """``anet balance --reconcile``'s lines; 1 when the chain and the ledger differ."""
    if not found["differences"]:
        print(f"The evidence chain and the ledger at {found['railUrl']} agree: "
              f"{found['transfers']} transfers, {found['receipts']} receipts.")
        return 0
    print(f"The evidence chain and the ledger at {found['railUrl']} differ "
          f"({found['transfers']} transfers, {found['receipts']} receipts):")
    for difference in found["differences"]:
        print(f"  {difference}")
    return 1
