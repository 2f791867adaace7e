"""This node's evidence chain against its home hub's ledger (docs/payments.md, "Reconciling"):
``GET /x402/reconcile`` on the control plane, what ``anet balance --reconcile`` and the
doctor's ``x402-reconcile`` show.

Every transfer the ledger holds for this node, paid or received, must have one
``payment.receipt`` in the chain whose settlement names that transaction, and every receipt in
the chain must name a transfer of the ledger, for the same task and amount. Each difference is a
sentence that names the transaction and the task.

The chain is read once: what a reconcile read of it (the receipts, the records that did not
verify, and where it stopped) is kept in ``receipts-read.json`` in the module's directory, and
the next reads only the records appended since; a chain that does not continue where the
reading stopped is read again from its start. So a reconcile costs the ledger's pages of this
node's entries and the chain's new records, whatever the chain's length.
"""

from __future__ import annotations

import asyncio
import json
from collections import defaultdict
from dataclasses import asdict, dataclass, field
from typing import Any

from aiohttp import web

from anet_core.api import (
    NODE_KEY,
    AnetError,
    DataPaths,
    EvidenceHead,
    Node,
    ReadRecord,
    VerifiedHistory,
    read_segment,
    write_atomic,
)
from anet_core.protocol.amounts import format_amount
from anet_x402.rail import NOT_JOINED_HINT, RailClient, RailError

routes = web.RouteTableDef()

READ_FILE = "receipts-read.json"
SETTLEMENT_KEYS = ("transaction", "task", "amount", "asset")
"""What a kept receipt keeps of its settlement: what :func:`differences` compares."""


@dataclass
class ReceiptsRead:
    """The chain's ``payment.receipt`` records as a reconcile read them, up to ``end``."""

    receipts: list[dict[str, Any]] = field(default_factory=list)
    """Each record's data, its settlement cut to :data:`SETTLEMENT_KEYS`."""
    broken: list[str] = field(default_factory=list)
    """A sentence per receipt record that does not verify."""
    end: int = 0
    last: EvidenceHead | None = None

    @classmethod
    def load(cls, paths: DataPaths) -> ReceiptsRead:
        """What was read before; nothing when it cannot be read (the chain is read again)."""
        try:
            kept = json.loads((paths.module_dir("x402") / READ_FILE).read_bytes())
            last = kept["last"]
            return cls(receipts=list(kept["receipts"]), broken=list(kept["broken"]),
                       end=int(kept["end"]),
                       last=None if last is None else EvidenceHead(int(last["seq"]),
                                                                   str(last["hash"])))
        except (OSError, ValueError, KeyError, TypeError):
            return cls()

    def add(self, read: ReadRecord) -> None:
        if read.problem:
            self.broken.append(f"the chain's record {read.record['seq']} does not verify: "
                               f"{read.problem}")
            return
        data = dict(read.record["data"])
        settlement = data.get("settlement")
        if isinstance(settlement, dict):
            data["settlement"] = {key: settlement[key] for key in SETTLEMENT_KEYS
                                  if key in settlement}
        self.receipts.append(data)

    def save(self, paths: DataPaths) -> None:
        directory = paths.module_dir("x402")
        directory.mkdir(parents=True, exist_ok=True)
        write_atomic(directory / READ_FILE, json.dumps(asdict(self)).encode())


def read_receipts(paths: DataPaths, history: VerifiedHistory) -> ReceiptsRead:
    """The chain's receipts: those read before, then those appended since. What ends at the
    last signed record is kept for the next read; records after it (an append a crash left
    short) are in the answer and not kept, since an append may still cut them."""
    known = ReceiptsRead.load(paths)
    segment = read_segment(paths.evidence_chain, history, start=known.end, after=known.last,
                           kind="payment.receipt")
    if segment is None:  # the chain does not continue what was read: read it all again
        known = ReceiptsRead()
        segment = read_segment(paths.evidence_chain, history, kind="payment.receipt")
        assert segment is not None  # read from its start, a chain continues nothing
    final = segment.last.seq if segment.last is not None else -1
    kept = ReceiptsRead(list(known.receipts), list(known.broken), segment.end, segment.last)
    tail = ReceiptsRead()
    for read in segment.records:
        (kept if read.record["seq"] <= final else tail).add(read)
    if kept != known:
        kept.save(paths)
    return ReceiptsRead(kept.receipts + tail.receipts, kept.broken + tail.broken, kept.end,
                        kept.last)


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
    read = await asyncio.to_thread(read_receipts, node.paths, node.identity.verified_history)
    return web.json_response({
        "aid": node.aid, "railUrl": url,
        "transfers": sum(entry.get("kind") == "transfer" for entry in entries),
        "receipts": len(read.receipts),
        "differences": read.broken + differences(node.aid, entries, read.receipts)})
