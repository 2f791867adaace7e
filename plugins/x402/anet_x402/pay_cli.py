"""``anet pay <task-id>``: the operator pays a quote the node did not pay by itself.

The command shows the quote, asks (``--yes`` for scripts) and pays through the control plane
(the control token: a client of the local A2A endpoint cannot reach these routes):
``GET /x402/quote/{task}`` and ``POST /x402/pay/{task}`` ``{"option": N}``. The payment goes
out on the task like the node's own automatic payments; paying again re-sends the same
authorization (docs/payments.md).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from aiohttp import web

from anet_core.api import (
    NODE_KEY,
    AnetError,
    CliContext,
    Node,
    ReasonError,
)
from anet_core.protocol.payments import format_amount
from anet_x402.signer import Signer, authorize_record, quote_of, read_option
from anet_x402.signer_service import SIGNER

routes = web.RouteTableDef()


def _signer(node: Node) -> Signer:
    signer = node.get(SIGNER)
    if signer is None:
        raise AnetError("x402-not-started", "the payments module did not start",
                        hint="the daemon log says why")
    return signer


def _options(task: dict[str, Any], peer: str) -> list[dict[str, Any]]:
    quote = quote_of(task)
    if quote is None:
        raise AnetError("no-quote", f"task {task['id']} waits for no payment",
                        hint="`anet task <id>` shows what it waits for")
    shown = []
    for index, raw in enumerate(quote.accepts):
        entry: dict[str, Any] = {"option": index, "accepted": raw}
        try:
            option = read_option(raw, task_id=task["id"], peer=peer)
            entry |= {"amount": format_amount(option.amount, option.asset),
                      "asset": option.asset, "payTo": option.payee, "rail": option.hub}
        except ReasonError as refused:
            entry["problem"] = refused.message
        shown.append(entry)
    return shown


@routes.get("/quote/{task}")
async def quote(request: web.Request) -> web.Response:
    node: Node = request.config_dict[NODE_KEY]
    task_id = request.match_info["task"]
    task, peer = node.tasks.get(None, task_id), node.tasks.peer_of(task_id)
    return web.json_response({"taskId": task_id, "peer": peer,
                              "reason": task.get("metadata", {}).get("anet.reason"),
                              "options": _options(task, peer)})


@routes.post("/pay/{task}")
async def pay(request: web.Request) -> web.Response:
    node: Node = request.config_dict[NODE_KEY]
    task_id = request.match_info["task"]
    try:
        body = await request.json() if request.can_read_body else {}
    except ValueError:
        body = None
    index = body.get("option") if isinstance(body, dict) else None
    if not isinstance(body, dict) or (index is not None and (
            not isinstance(index, int) or isinstance(index, bool))):
        raise AnetError("invalid-params", f"the body {str(body)[:80]!r} is not "
                                          '{"option": <number>}',
                        hint="give the option's number from `anet pay <task-id>`")
    task, peer = node.tasks.get(None, task_id), node.tasks.peer_of(task_id)
    signer = _signer(node)
    try:
        message, signed, fresh = await signer.operator_message(task, peer, index)
    except ReasonError as refused:
        await asyncio.to_thread(node.evidence.append, "payment.refuse", {
            "taskId": task_id, "peer": peer, "reason": refused.reason, "tier": "operator"})
        if isinstance(refused, AnetError):
            raise
        raise AnetError(refused.reason, refused.message,
                        hint="`anet pay <task-id>` lists the options") from None
    if fresh:
        option = read_option(signed.payload["accepted"], task_id=task_id, peer=peer)
        kind, data = authorize_record(signed, peer, option)
        await asyncio.to_thread(node.evidence.append, kind, data)
    sent = await node.tasks.send_own(task_id, message)
    return web.json_response({"taskId": task_id, "signedNow": fresh, "nonce": signed.nonce,
                              "amount": format_amount(signed.amount, signed.asset),
                              "asset": signed.asset, "state": sent["status"]["state"]})


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
