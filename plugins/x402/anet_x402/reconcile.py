"""This node's evidence chain against its home hub's ledger (docs/payments.md, "Reconciling"):
``GET /x402/reconcile`` on the control plane, what ``anet balance --reconcile`` shows.

Every transfer the ledger holds for this node, paid or received, must have one
``payment.receipt`` in the chain whose settlement names that transaction, and every receipt in
the chain must name a transfer of the ledger, for the same task and amount. Each difference is a
sentence that names the transaction and the task.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

from aiohttp import web

from anet_core.api import NODE_KEY, AnetError, Node, read_records
from anet_core.protocol.amounts import format_amount
from anet_x402.rail import NOT_JOINED_HINT, RailClient, RailError

routes = web.RouteTableDef()


def differences(aid: str, entries: list[dict[str, Any]],
                receipts: list[dict[str, Any]]) -> list[str]:
    """What the ledger's ``entries`` of ``aid`` (``anet hub ledger --json`` shapes) and the
    ``payment.receipt`` records of its chain (their data) do not agree on."""
    transfers = {entry["transaction"]: entry for entry in entries
                 if entry.get("kind") == "transfer"}
    kept: defaultdict[str, list[dict[str, Any]]] = defaultdict(list)
    for receipt in receipts:
        settlement = receipt.get("settlement") or {}
        kept[str(settlement.get("transaction"))].append(receipt)
    found = []
    for transaction, entry in transfers.items():
        way = (f"paid {entry['payee']}" if entry["payer"] == aid
               else f"was paid by {entry['payer']}")
        if transaction not in kept:
            found.append(f"{transaction}: this node {way} {entry['amount']} {entry['asset']} "
                         f"for task {entry.get('task')}, and its chain holds no receipt of it")
    for transaction, records in sorted(kept.items()):
        task = records[0].get("taskId")
        entry = transfers.get(transaction)
        settlement = records[0].get("settlement") or {}
        if entry is None:
            found.append(f"{transaction}: the chain holds a receipt for task {task}, and the "
                         "hub's ledger holds no such transfer of this node")
        elif len(records) > 1:
            found.append(f"{transaction}: the chain holds {len(records)} receipts of it (task "
                         f"{task}), one is due")
        elif records[0].get("verified") is False:
            found.append(f"{transaction}: the receipt for task {task} did not verify: "
                         f"{records[0].get('problem')}")
        elif (settlement.get("task"), _amount(settlement)) != (entry.get("task"),
                                                               entry["amount"]):
            found.append(f"{transaction}: the receipt says task {settlement.get('task')}, "
                         f"{_amount(settlement)} {settlement.get('asset')}; the ledger says task "
                         f"{entry.get('task')}, {entry['amount']} {entry['asset']}")
    return found


def _amount(settlement: dict[str, Any]) -> str | None:
    try:
        return format_amount(int(settlement["amount"]), str(settlement["asset"]))
    except (KeyError, TypeError, ValueError):
        return None


@routes.get("/reconcile")
async def reconcile(request: web.Request) -> web.Response:
    node: Node = request.config_dict[NODE_KEY]
    url = node.hub.status.hub_url or node.config.hub.url
    if not url:
        raise AnetError("x402-not-joined", "this node has no home hub, so no ledger to "
                                           "reconcile with", hint=NOT_JOINED_HINT)
    try:
        async with RailClient(url) as rail:
            entries = await rail.ledger(node.identity)
    except RailError as error:
        raise AnetError(error.reason, error.message,
                        hint="`anet status` shows the hub connection") from None
    records = await asyncio.to_thread(read_records, node.paths.evidence_chain,
                                      node.identity.verified_history, kind="payment.receipt")
    broken = [f"the chain's record {read.record['seq']} does not verify: {read.problem}"
              for read in records if read.problem]
    receipts = [read.record["data"] for read in records if not read.problem]
    return web.json_response({
        "aid": node.aid, "railUrl": url,
        "transfers": sum(entry.get("kind") == "transfer" for entry in entries),
        "receipts": len(receipts),
        "differences": broken + differences(node.aid, entries, receipts)})
