"""Paying a task's quote on the control plane (the control token), for ``anet pay`` and the MCP
tools of the module (anet_x402.mcp_tools):

- ``GET /x402/quote/{task}`` shows the quote, each option with the tier that may pay it now;
- ``POST /x402/pay/{task}`` ``{"option": N}``, the operator's: signs without tier limits (only
  the credit at the rail);
- ``POST /x402/agent-pay/{task}`` ``{"option": N}``, the agent's (the tool ``x402_pay``): signs
  only within ``agent_max`` and ``agent_daily_max``, checked here, in the daemon, so that no
  tool can pay more by what it sends. It has no parameter that widens it.

Both send the payment on the task like the node's own payments; paying again re-sends the same
authorization (docs/payments.md, "Paying from an MCP host").
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from anet_core.api import NODE_KEY, AnetError, Node, ReasonError
from anet_core.protocol.amounts import format_amount
from anet_x402.signer import Signer, authorize_record, quote_of, read_option
from anet_x402.signer_service import SIGNER
from anet_x402.tiers import Tier

routes = web.RouteTableDef()


def _signer(node: Node) -> Signer:
    signer = node.get(SIGNER)
    if signer is None:
        raise AnetError("x402-not-started", "the payments module did not start",
                        hint="the daemon log says why")
    return signer


WOULD_DO = {Tier.AUTO: "the node pays it by itself",
            Tier.AGENT: "the agent may pay it (the MCP tool x402_pay)",
            Tier.OPERATOR: "only the operator pays it, on a terminal: anet pay {task}"}


def _options(task: dict[str, Any], peer: str, signer: Signer) -> list[dict[str, Any]]:
    quote = quote_of(task)
    if quote is None:
        raise AnetError("no-quote", f"task {task['id']} waits for no payment",
                        hint="`anet task <id>` shows what it waits for")
    shown = []
    for index, raw in enumerate(quote.accepts):
        entry: dict[str, Any] = {"option": index, "accepted": raw}
        try:
            option = read_option(raw, task_id=task["id"], peer=peer)
            tier = signer.tier_of(option)
            entry |= {"amount": format_amount(option.amount, option.asset),
                      "asset": option.asset, "payTo": option.payee, "rail": option.hub,
                      "tier": tier.value, "wouldDo": WOULD_DO[tier].format(task=task["id"])}
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
                              "options": _options(task, peer, _signer(node))})


@routes.post("/pay/{task}")
async def pay(request: web.Request) -> web.Response:
    return await _paid(request, Tier.OPERATOR)


@routes.post("/agent-pay/{task}")
async def agent_pay(request: web.Request) -> web.Response:
    return await _paid(request, Tier.AGENT)


async def _paid(request: web.Request, tier: Tier) -> web.Response:
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
    sign = signer.operator_message if tier is Tier.OPERATOR else signer.agent_message
    try:
        message, signed, fresh = await sign(task, peer, index)
    except ReasonError as refused:
        await node.evidence.record("payment.refuse", {
            "taskId": task_id, "peer": peer, "reason": refused.reason, "tier": tier.value})
        if isinstance(refused, AnetError):
            raise
        raise AnetError(refused.reason, refused.message,
                        hint="`anet pay <task-id>` lists the options") from None
    if fresh:
        option = read_option(signed.payload["accepted"], task_id=task_id, peer=peer)
        kind, data = authorize_record(signed, peer, option)
        await node.evidence.record(kind, data)  # behind the records the loop queued before
    sent = await node.tasks.send_own(task_id, message)
    return web.json_response({"taskId": task_id, "signedNow": fresh, "nonce": signed.nonce,
                              "tier": signed.tier.value,
                              "amount": format_amount(signed.amount, signed.asset),
                              "asset": signed.asset, "state": sent["status"]["state"]})
