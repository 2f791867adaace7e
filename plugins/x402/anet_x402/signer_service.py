"""The signing service on the running node: its lifespan, the requester hooks' handlers and the
proxy card's a2a-x402 extension (docs/payments.md). The doctor's ``x402-tiers`` check is in
anet_x402.payer_checks."""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from anet_core.api import (
    CancelCheck,
    CardExtension,
    Node,
    NodeKey,
    PeerInfo,
    RequesterTurn,
    TurnHandler,
)
from anet_x402.config import X402Config
from anet_x402.extension import PAYMENT_RECEIPTS
from anet_x402.rail import RailError, settlement_problem
from anet_x402.signer import (
    X402_EXTENSION,
    X402_EXTENSION_V02,
    X402_EXTENSIONS,
    Signer,
    is_payment_answer,
    quote_of,
)
from anet_x402.signer_credit import CARD_CREDIT_MAX_AGE_S, Credit
from anet_x402.spend import PayerBook
from anet_x402.tiers import Limits

log = logging.getLogger(__name__)

MODULE = "x402"
NO_CREDIT_RETRY_S = 5.0
SIGNER = NodeKey("x402-signer", Signer)


@asynccontextmanager
async def signing_service(node: Node) -> AsyncIterator[None]:
    """The signer lives as long as the daemon; its view of the credit is kept fresh for the
    proxy card."""
    config = node.config.module(MODULE, X402Config)
    book = PayerBook.of(node.paths)
    credit = Credit(identity=node.identity, hub_url=lambda: node.hub.status.hub_url)
    node[SIGNER] = Signer(identity=node.identity, limits=Limits(config), book=book,
                          credit=credit)
    refresh = asyncio.ensure_future(_keep_credit_fresh(credit, Limits(config)))
    try:
        yield
    finally:
        refresh.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await refresh
        del node[SIGNER]
        book.close()


async def _keep_credit_fresh(credit: Credit, limits: Limits) -> None:
    """Read the credit now and then; often while there is none, so that a node the hub's
    operator just credited declares the extension soon."""
    while limits.configured:
        try:
            await credit.refresh()
        except RailError as error:
            log.debug("event=credit-unknown reason=%s", error.reason)
        await asyncio.sleep(CARD_CREDIT_MAX_AGE_S / 2 if credit.payable_now()
                            else NO_CREDIT_RETRY_S)


def waiting_handler(node: Node, turn: RequesterTurn) -> TurnHandler | None:
    signer = node.get(SIGNER)
    if signer is None or quote_of(turn.task) is None:
        return None
    return TurnHandler(module=MODULE, run=signer.waiting)


def answer_handler(node: Node, turn: RequesterTurn) -> TurnHandler | None:
    signer = node.get(SIGNER)
    if signer is None or turn.message is None or \
            not is_payment_answer(turn.message, turn.metadata):
        return None
    return TurnHandler(module=MODULE, run=signer.answer)


def cancel_check(node: Node, turn: RequesterTurn) -> CancelCheck | None:
    signer = node.get(SIGNER)
    return None if signer is None else CancelCheck(module=MODULE, run=signer.withdraw)


def receipt_records(node: Node, turn: RequesterTurn) -> list[tuple[str, dict[str, Any]]]:
    """The payer's ``payment.receipt``: the hub's settlement the agent's final status carries
    for the payment of the task, checked against the pinned key history of the home hub and
    against this payment (``verified`` false and the ``problem`` when it is not)."""
    status = turn.task["status"]
    receipts = ((status.get("message") or {}).get("metadata") or {}).get(PAYMENT_RECEIPTS)
    paid = [receipt for receipt in receipts if isinstance(receipt, dict)
            and receipt.get("success")] if isinstance(receipts, list) else []
    if status.get("state") != "TASK_STATE_COMPLETED" or not paid:
        return []
    settlement = (paid[-1].get("extra") or {}).get("settlement")
    problem = settlement_problem(node.paths.hub_pin, settlement,
                                 {"payer": node.aid, "payee": turn.peer_aid,
                                  "task": turn.task_id})
    if problem:
        log.warning("event=payment-receipt-unverified task=%s problem=%r", turn.task_id, problem)
    return [("payment.receipt", {"taskId": turn.task_id, "peer": turn.peer_aid,
                                 "settlement": settlement, "verified": problem is None,
                                 **({"problem": problem} if problem else {})})]


def _remote_takes_x402(card: dict[str, Any] | None) -> bool:
    if not card:
        return False
    if card.get("charge") not in (None, "free"):
        return True
    declared = (card.get("capabilities") or {}).get("extensions") or card.get("extensions") or []
    return any(isinstance(extension, dict) and extension.get("uri") in X402_EXTENSIONS
               for extension in declared)


def card_extensions(node: Node, peer: PeerInfo) -> list[CardExtension]:
    """The a2a-x402 extension, only when the remote agent takes payments and this node can sign
    and settle now: tiers configured and credit at its home hub's rail (last read within
    a minute)."""
    signer = node.get(SIGNER)
    if signer is None or not _remote_takes_x402(peer.card) or not signer.limits.configured or \
            not signer.credit.payable_now():
        return []
    return [CardExtension(module=MODULE, uri=X402_EXTENSION,
                          also_activated_by=(X402_EXTENSION_V02,),
                          description="Payments (a2a-x402): this node is the signing service; "
                                      "answer a quote with payment-submitted and the option in "
                                      "anet.payment.accept, no payload")]
