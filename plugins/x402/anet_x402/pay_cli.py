"""``anet pay <task-id>``: the operator pays a quote the node did not pay by itself.

The command shows the quote, asks (``--yes`` for scripts) and pays through the daemon's control
routes (anet_x402.signer_routes; the control token: a client of the local A2A endpoint cannot
reach them). Paying again re-sends the same authorization (docs/payments.md).
"""

from __future__ import annotations

import argparse
import sys

from anet_core.api import AnetError, CliContext


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task_id", metavar="task-id", help="the task waiting for payment")
    parser.add_argument("--option", type=int, default=None,
                        help="the option to pay (a number the command lists); needed when the "
                             "quote has several")
    parser.add_argument("--yes", action="store_true", help="pay without asking")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace, ctx: CliContext) -> int:
    daemon = ctx.daemon
    shown = daemon.get(f"/x402/quote/{args.task_id}")
    if not args.json or not args.yes:
        print(f"Task {shown['taskId']} of {shown['peer']} asks for payment"
              + (f" ({shown['reason']})" if shown.get("reason") else "") + ":")
        for entry in shown["options"]:
            line = (f"{entry['amount']} {entry['asset']} to {entry['payTo']}, rail "
                    f"{entry['rail']}" if "amount" in entry else f"not payable: "
                                                                 f"{entry['problem']}")
            print(f"  [{entry['option']}] {line}")
    if not args.yes:
        if not sys.stdin.isatty():
            raise AnetError("confirmation-needed", "anet pay asks before it pays, and the input "
                                                   "is no terminal", hint="add --yes to pay")
        chosen = "" if args.option is None else f" option {args.option}"
        if input(f"Pay{chosen}? [y/N] ").strip().lower() not in {"y", "yes"}:
            print("Nothing paid.")
            return 1
    body = {} if args.option is None else {"option": args.option}
    paid = daemon.post(f"/x402/pay/{args.task_id}", body)
    if args.json:
        ctx.print_json(paid)
        return 0
    again = "" if paid["signedNow"] else " (the authorization signed earlier, sent again)"
    print(f"Paid {paid['amount']} {paid['asset']} for task {paid['taskId']}{again}; the task "
          f"is {paid['state']}.")
    return 0
