"""The operator's payments on the control plane (the control token), for ``anet pay``:
``GET /x402/quote/{task}`` shows a task's quote, ``POST /x402/pay/{task}`` ``{"option": N}``
signs it without tier limits (only the credit at the rail) and sends it on the task like the
node's own payments; paying again re-sends the same authorization (docs/payments.md).
"""

from __future__ import annotations

import asyncio
from typing import Any

from aiohttp import web

from anet_core.api import NODE_KEY, AnetError, Node, ReasonError
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
