"""``anet pay <task-id>``: the operator pays a quote the node did not pay by itself.

The command shows the quote, asks (``--yes`` for scripts) and pays through the daemon's control
routes (anet_x402.signer_routes; the control token: a client of the local A2A endpoint cannot
reach them). Paying again re-sends the same authorization (docs/payments.md).
"""

from __future__ import annotations

import argparse
import sys

from anet_core.api import AnetError, CliContext
from anet_core.wire import TaskState

DEFAULT_WAIT_S = 120.0
"""How long ``anet pay`` waits for the paid task's outcome: the work and the settlement."""

def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("task_id", metavar="task-id", help="the task waiting for payment")
    parser.add_argument("--option", type=int, default=None,
                        help="the option to pay (a number the command lists); needed when the "
                             "quote has several")
    parser.add_argument("--yes", action="store_true", help="pay without asking")
    parser.add_argument("--no-wait", action="store_true",
                        help="print what was paid at once, not the task's outcome")
    parser.add_argument("--timeout", type=float, default=DEFAULT_WAIT_S,
                        help="seconds to wait for the task's outcome (default %(default)s)")
    parser.add_argument("--json", action="store_true", help="print JSON")


def run(args: argparse.Namespace, ctx: CliContext) -> int:
    daemon = ctx.daemon
    shown = daemon.get(f"/x402/quote/{args.task_id}")
    if not args.json:
        print(f"Task {shown['taskId']} of {shown['peer']} asks for payment"
              + (f" ({shown['reason']})" if shown.get("reason") else "") + ":")
        for entry in shown["options"]:
            line = (f"{entry['amount']} {entry['asset']} to {entry['payTo']}, rail "
                    f"{entry['rail']}" if "amount" in entry else f"not payable: "
                                                                 f"{entry['problem']}")
            print(f"  [{entry['option']}] {line}")
    if not args.yes:
        if args.json or not sys.stdin.isatty():
            raise AnetError("confirmation-needed", "anet pay asks before it pays, and "
                            + ("--json leaves no one to ask" if args.json
                               else "the input is no terminal"), hint="add --yes to pay")
        chosen = "" if args.option is None else f" option {args.option}"
        if input(f"Pay{chosen}? [y/N] ").strip().lower() not in {"y", "yes"}:
            print("Nothing paid.")
            return 1
    body = {} if args.option is None else {"option": args.option}
    paid = daemon.post(f"/x402/pay/{args.task_id}", body)
    if not args.no_wait:
        task = daemon.settled_task(args.task_id, timeout_s=args.timeout)
        paid |= {"state": task["status"]["state"],
                 "reason": task.get("metadata", {}).get("anet.reason")}
    state = TaskState(paid["state"])
    waited_out = not args.no_wait and not state.is_settled
    if args.json:
        ctx.print_json(paid)
        return 3 if waited_out else 0
    again = "" if paid["signedNow"] else " (the authorization signed earlier, sent again)"
    reason = f" ({paid['reason']})" if paid.get("reason") else ""
    print(f"Paid {paid['amount']} {paid['asset']} for task {paid['taskId']}{again}; the task "
          f"is {state.word}{reason}"
          + (f", still on its way after {args.timeout:g} s" if waited_out else "") + ".")
    return 3 if waited_out else 0
