"""The node as the signing service of its A2A clients (docs/payments.md, "Paying for skills").

A task this node sent comes back input-required with a quote (``x402.payment.status:
payment-required`` and ``x402.payment.required`` in its status message, per the a2a-x402
extension, https://github.com/google-agentic-commerce/a2a-x402). Then:

- within ``auto_max`` the node pays by itself, whatever the client activated;
- above it, a client that activated the extension answers ``payment-submitted`` without a
  payload, naming the option in ``anet.payment.accept``; the node signs within the agent tier;
- everything else waits for the operator (``anet pay``), with a reason.

Nothing is signed twice for a task and option: the payer's book keeps each authorization
before its message leaves, and a retry, a repeat or a restart re-sends that one. Refusals and
holds leave the task input-required with its quote (docs/payments.md, "Reasons").
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

from pydantic import ValidationError

from anet_core.api import (
    AnetError,
    CancelVerdict,
    Identity,
    Reason,
    ReasonError,
    RequesterTurn,
    TurnAnswer,
)
from anet_core.protocol.amounts import (
    RAIL_SCHEME,
    PaymentError,
    asset_decimals,
    format_amount,
    rail_hub,
)
from anet_core.protocol.payments import sign_authorization
from anet_x402.extension import PAYMENT_PAYLOAD, PAYMENT_REQUIRED, PAYMENT_STATUS, PaymentState
from anet_x402.rail import Decision, RailClient, RailError, again_while_unreachable
from anet_x402.signer_credit import Credit
from anet_x402.spend import PayerBook, Signed
from anet_x402.tiers import Limits, Tier

log = logging.getLogger(__name__)

X402_EXTENSION = "https://github.com/google-a2a/a2a-x402/v0.1"
"""The a2a-x402 extension URI this node declares."""
X402_EXTENSION_V02 = "https://github.com/google-agentic-commerce/a2a-x402/blob/main/spec/v0.2"
"""The URI of the extension's v0.2 specification, accepted for activation too."""
X402_EXTENSIONS = frozenset({X402_EXTENSION, X402_EXTENSION_V02})

ACCEPT_KEY = "anet.payment.accept"
"""Client → node: the option chosen, copied unchanged from ``x402.payment.required.accepts``."""
DEFAULT_VALIDITY_S = 600
VOID_ATTEMPTS = 3
VOID_RETRY_S = 0.5
"""A cancel's void is asked this many times, pausing this long, then twice that, while the rail
does not answer: voiding again answers the first decision."""


@dataclass(frozen=True)
class Quote:
    """The quote a task carries, as the provider wrote it (options compared unchanged)."""

    required: dict[str, Any]
    accepts: list[dict[str, Any]]


def quote_of(task: dict[str, Any]) -> Quote | None:
    """The quote in the task's status message (the provider's, or this node's hold that keeps
    it), or None."""
    metadata = (task.get("status", {}).get("message") or {}).get("metadata") or {}
    required = metadata.get(PAYMENT_REQUIRED)
    if metadata.get(PAYMENT_STATUS) not in {PaymentState.REQUIRED, PaymentState.FAILED} or \
            not isinstance(required, dict):
        return None
    from x402.schemas import PaymentRequired  # at the first quote (docs/performance.md)

    try:
        PaymentRequired.model_validate(required)
    except ValidationError as error:
        log.warning("event=quote-unreadable task=%s error=%r", task.get("id"),
                    str(error.errors()[0]["msg"]))
        return None
    return Quote(required=required, accepts=[option for option in required["accepts"]
                                             if isinstance(option, dict)])


def sent_nonces(task: dict[str, Any]) -> set[str]:
    """The nonces of the authorizations already sent on the task (its history)."""
    nonces = set()
    for message in task.get("history", []):
        payload = (message.get("metadata") or {}).get(PAYMENT_PAYLOAD)
        if message.get("role") == "ROLE_USER" and isinstance(payload, dict):
            authorization = (payload.get("payload") or {}).get("authorization") or {}
            if isinstance(authorization.get("nonce"), str):
                nonces.add(authorization["nonce"])
    return nonces


def is_payment_answer(message: dict[str, Any], metadata: dict[str, Any] | None) -> bool:
    return _merged(message, metadata).get(PAYMENT_STATUS) == PaymentState.SUBMITTED


def _merged(message: dict[str, Any], metadata: dict[str, Any] | None) -> dict[str, Any]:
    """The message's metadata over the request's: either may carry the payment keys."""
    return {**(metadata or {}), **(message.get("metadata") or {})}


@dataclass(frozen=True)
class Option:
    """An option of a quote this node could pay: the raw entry and what it says."""

    raw: dict[str, Any]
    hub: str
    asset: str
    amount: int
    payee: str
    task: str

    @property
    def price(self) -> str:
        return f"{format_amount(self.amount, self.asset)} {self.asset}"


def read_option(raw: dict[str, Any], *, task_id: str, peer: str) -> Option:
    """The option when this node can pay it for ``task_id`` to ``peer``; a
    :class:`ReasonError` ``option_not_offered`` naming what is wrong otherwise."""
    from x402.schemas import PaymentRequirements

    try:
        requirements = PaymentRequirements.model_validate(raw)
        hub = rail_hub(requirements.network)
        asset_decimals(requirements.asset)
        amount = int(requirements.amount) if requirements.amount.isdigit() else 0
    except (ValidationError, PaymentError) as error:
        raise ReasonError("option-not-offered",
                          f"the option cannot be paid by this node: {error}") from None
    problem = ""
    if requirements.scheme != RAIL_SCHEME:
        problem = f"scheme {requirements.scheme!r} (this node pays {RAIL_SCHEME!r})"
    elif amount <= 0:
        problem = f"amount {requirements.amount!r}"
    elif requirements.pay_to != peer:
        problem = f"payTo {requirements.pay_to} is not the agent {peer}"
    elif (requirements.extra or {}).get("task") != task_id:
        problem = f"extra.task {(requirements.extra or {}).get('task')!r} is not {task_id}"
    if problem:
        raise ReasonError("option-not-offered", f"the option cannot be paid: {problem}")
    return Option(raw=raw, hub=hub, asset=requirements.asset, amount=amount,
                  payee=requirements.pay_to, task=task_id)


def payment_message(signed: Signed, base: dict[str, Any] | None = None) -> dict[str, Any]:
    """The payment message of ``signed``: the client's ``base`` message with the payment in its
    metadata, or the node's own (its messageId names the authorization, so sending it again is
    recognised)."""
    base = base or {"messageId": f"anet-pay-{signed.nonce[:32]}",
                    "parts": [{"text": "Payment authorized by the requester's node"}]}
    kept = {key: value for key, value in (base.get("metadata") or {}).items()
            if not key.startswith(("x402.", "anet."))}
    extensions = list(base.get("extensions", []))
    return {**base, "role": "ROLE_USER",
            "extensions": extensions + [X402_EXTENSION] * (X402_EXTENSION not in extensions),
            "metadata": kept | {PAYMENT_STATUS: PaymentState.SUBMITTED.value,
                                PAYMENT_PAYLOAD: signed.payload}}


def _short(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:16]


class Signer:
    """The signing service of one running node."""

    def __init__(self, *, identity: Identity, limits: Limits, book: PayerBook,
                 credit: Credit) -> None:
        self._identity = identity
        self.limits = limits
        self.book = book
        self.credit = credit
        self._signing = asyncio.Lock()

    @asynccontextmanager
    async def _one_at_a_time(self) -> AsyncIterator[None]:
        """Find-or-sign runs alone (for every task: payments are few and quick), so two turns
        of a task, or a turn and ``anet pay``, never both sign."""
        async with self._signing:
            yield

    # --- the agent's quote ------------------------------------------------------------------

    async def waiting(self, turn: RequesterTurn) -> TurnAnswer:
        """A quote arrived (or the daemon started with it waiting)."""
        quote = quote_of(turn.task)
        if quote is None:
            return TurnAnswer()
        options = self._payable(quote, turn.task_id, turn.peer_aid)
        seq = turn.task.get("metadata", {}).get("anet.state_seq", 0)
        hold_id = f"anet-x402-{turn.task_id}-{seq}"
        sent = sent_nonces(turn.task)
        async with self._one_at_a_time():
            for option in options:
                if (signed := self.book.reusable(turn.task_id, option.raw)) is None:
                    continue
                if signed.nonce in sent:
                    # Asked again for what was paid: never a second payment without a person.
                    return self._hold(turn, quote, Reason.NEEDS_OPERATOR_APPROVAL, hold_id,
                                      PaymentState.REQUIRED,
                                      "The agent asks again for a payment this node already "
                                      f"sent ({option.price}); the operator decides with `anet "
                                      f"pay {turn.task_id}`.")
                return TurnAnswer(send=payment_message(signed))
            automatic = [option for option in options
                         if self.limits.auto_pays(option.asset, option.amount)]
            for option in automatic:
                if await self.credit.holds(option.hub, option.asset, option.amount):
                    return self._pay(turn, option, quote, Tier.AUTO)
        if automatic:
            return self._hold(turn, quote, Reason.RAIL_NOT_PAYABLE, hold_id, PaymentState.FAILED,
                              f"The price {automatic[0].price} is within this node's automatic "
                              f"tier, but its rail at {automatic[0].hub} holds too little credit "
                              "for it; nothing was signed.")
        if not turn.extensions & X402_EXTENSIONS:
            return self._hold(turn, quote, Reason.PAYMENT_EXTENSION_NOT_ACTIVATED, hold_id,
                              PaymentState.REQUIRED,
                              "The price is above this node's automatic tier and the client did "
                              "not activate the a2a-x402 extension; the operator pays with `anet "
                              f"pay {turn.task_id}`.")
        if any(self.limits.agent_pays(option.asset, option.amount,
                                      self.book.spent(option.asset)) for option in options):
            return TurnAnswer()  # the client submits the payment, the node signs it
        return self._hold(turn, quote, Reason.NEEDS_OPERATOR_APPROVAL, hold_id,
                          PaymentState.REQUIRED,
                          "The price is above what this node signs for its agent (agent_max, "
                          f"agent_daily_max); the operator pays with `anet pay {turn.task_id}`.")

    # --- the client's answer ----------------------------------------------------------------

    async def answer(self, turn: RequesterTurn) -> TurnAnswer:
        """The client submitted a payment on the task."""
        assert turn.message is not None
        metadata = _merged(turn.message, turn.metadata)
        quote = quote_of(turn.task)
        hold_id = f"anet-x402-{turn.task_id}-{_short(str(turn.message.get('messageId')))}"
        if PAYMENT_PAYLOAD in metadata:
            return self._hold(turn, quote, Reason.CLIENT_PAYLOAD_UNSUPPORTED, hold_id,
                              PaymentState.FAILED,
                              "This node is the payer and signs payments itself: send "
                              "payment-submitted without x402.payment.payload, with the option "
                              f"in {ACCEPT_KEY}." if quote is not None else
                              "This node is the payer and signs payments itself: send the "
                              "task without x402.payment.payload; the agent's quote comes "
                              "back and the node pays it within its tiers. Nothing was sent.")
        try:
            option = self._chosen(quote, metadata.get(ACCEPT_KEY), turn)
        except ReasonError as refused:
            return self._hold(turn, quote, Reason.OPTION_NOT_OFFERED, hold_id,
                              PaymentState.FAILED, refused.message)
        assert quote is not None
        async with self._one_at_a_time():
            if (signed := self.book.reusable(turn.task_id, option.raw)) is not None:
                return TurnAnswer(send=payment_message(signed, turn.message))
            # Who may pay before whether the rail can: above the agent's limits the operator
            # decides, whatever the credit (the seed's order).
            if not turn.extensions & X402_EXTENSIONS:
                return self._hold(turn, quote, Reason.PAYMENT_EXTENSION_NOT_ACTIVATED, hold_id,
                                  PaymentState.REQUIRED,
                                  "Activate the a2a-x402 extension (A2A-Extensions: "
                                  f"{X402_EXTENSION}) to pay through this node, or the operator "
                                  f"pays with `anet pay {turn.task_id}`.")
            spent = self.book.spent(option.asset)
            if not self.limits.agent_pays(option.asset, option.amount, spent):
                return self._hold(turn, quote, Reason.NEEDS_OPERATOR_APPROVAL, hold_id,
                                  PaymentState.REQUIRED,
                                  f"{option.price} is above what this node signs for its agent "
                                  f"(agent_max, agent_daily_max; "
                                  f"{format_amount(spent, option.asset)} paid today); the "
                                  f"operator pays with `anet pay {turn.task_id}`.")
            if not await self.credit.holds(option.hub, option.asset, option.amount):
                return self._hold(turn, quote, Reason.RAIL_NOT_PAYABLE, hold_id,
                                  PaymentState.FAILED,
                                  f"This node holds too little credit at the rail of "
                                  f"{option.hub} to pay {option.price}; nothing was signed.")
            return self._pay(turn, option, quote, Tier.AGENT, base=turn.message)

    def _chosen(self, quote: Quote | None, accept: Any, turn: RequesterTurn) -> Option:
        if quote is None:
            raise ReasonError("option-not-offered",
                              f"task {turn.task_id} carries no quote to pay")
        if accept is None:
            if len(quote.accepts) != 1:
                raise ReasonError("option-not-offered",
                                  f"the quote has {len(quote.accepts)} options: copy the chosen "
                                  f"one from x402.payment.required.accepts into {ACCEPT_KEY}")
            accept = quote.accepts[0]
        # The quote's own entry, not the client's copy: a JSON client may have turned 600 into
        # 600.0, which is equal but not the same bytes for the payee and the payer's book.
        offered = next((option for option in quote.accepts if option == accept), None)
        if offered is None:
            raise ReasonError("option-not-offered",
                              f"{ACCEPT_KEY} is not one of the quote's options (copy one "
                              "unchanged from x402.payment.required.accepts)")
        return read_option(offered, task_id=turn.task_id, peer=turn.peer_aid)

    # --- the client's cancel ----------------------------------------------------------------

    async def withdraw(self, turn: RequesterTurn) -> CancelVerdict:
        """The client cancels the task: each authorization signed for it is voided at its rail
        first, where the ledger decides once between the void and the payee's settlement
        (docs/payments.md, "Cancel and settlement"). One settled already refuses the cancel (the
        task completes with its receipt); a rail that does not answer refuses it too (if it took
        the void before its answer was lost, the payee's settle finds it and ends the task).
        Holding the signing lock, so no payment is signed meanwhile."""
        async with self._one_at_a_time():
            signed = self.book.signed_for(turn.task_id)
            if not signed:
                return CancelVerdict()
            nonces = [item.nonce for item in signed]
            network = signed[-1].payload["accepted"]["network"]
            url = self.credit.hub_url()

            async def void() -> list[Decision]:
                if not url:
                    raise RailError("rail-unreachable", "this node has no home hub now, so it "
                                                        "cannot reach the rail of its payment")
                async with RailClient(url) as rail:
                    return await rail.void(self._identity, hub_aid=rail_hub(network),
                                           task=turn.task_id, nonces=nonces)

            try:
                decisions = await again_while_unreachable(
                    void, attempts=VOID_ATTEMPTS, pause_s=VOID_RETRY_S,
                    what=f"void task={turn.task_id}")
            except RailError as error:
                return CancelVerdict(
                    refused="rail-unreachable",
                    message=f"task {turn.task_id} is paid, and its rail did not answer the "
                            f"void of the payment ({error.message}): the cancel did not take "
                            "effect here; the task goes on, or ends canceled if the rail took "
                            "the void",
                    hint="cancel again once the hub answers: the rail then says which "
                         "(`anet status` shows the link)",
                    evidence=(("payment.refuse", {"taskId": turn.task_id, "peer": turn.peer_aid,
                                                  "reason": "rail-unreachable",
                                                  "nonces": nonces}),))
        settled = next((decision for decision in decisions if decision.settled), None)
        record = ("payment.void", {"taskId": turn.task_id, "peer": turn.peer_aid,
                                   "nonces": nonces, "network": network,
                                   "outcome": "settled" if settled else "voided",
                                   **({"transaction": settled.transaction,
                                       "settlement": settled.settlement} if settled else {})})
        log.info("event=payment-void task=%s outcome=%s", turn.task_id, record[1]["outcome"])
        if settled is None:
            return CancelVerdict(evidence=(record,))
        return CancelVerdict(
            refused="payment-settled",
            message=f"the payment for task {turn.task_id} was settled at {network} before the "
                    f"cancel (transaction {settled.transaction}): the task completes with its "
                    "receipt",
            hint="wait for the task's end (GetTask, SubscribeToTask, `anet task <id>`)",
            evidence=(record,))

    # --- the operator -----------------------------------------------------------------------

    async def operator_message(self, task: dict[str, Any], peer: str,
                               index: int | None) -> tuple[dict[str, Any], Signed, bool]:
        """The payment message the operator approved for option ``index`` of the task's quote
        (the only one when None), the authorization, and whether it was signed just now."""
        quote, option = _numbered(task, peer, index)
        async with self._one_at_a_time():
            signed = self.book.reusable(task["id"], option.raw)
            if signed is not None and signed.nonce not in sent_nonces(task):
                return payment_message(signed), signed, False
            await self._check_credit(option)
            signed = self._sign(option, quote, Tier.OPERATOR)
            return payment_message(signed), signed, True

    # --- the node's own agent (the MCP tool x402_pay) ---------------------------------------

    async def agent_message(self, task: dict[str, Any], peer: str,
                            index: int | None) -> tuple[dict[str, Any], Signed, bool]:
        """Like :meth:`operator_message`, within the agent tier only: ``agent_max`` per payment
        and ``agent_daily_max`` per day, the limits an A2A client's payment-submitted has. Above
        them an :class:`AnetError` ``needs-operator-approval``, nothing signed. A payment
        already sent on the task is never made again here (the operator decides)."""
        quote, option = _numbered(task, peer, index)
        async with self._one_at_a_time():
            signed = self.book.reusable(task["id"], option.raw)
            sent = sent_nonces(task)
            if signed is not None and signed.nonce not in sent:
                return payment_message(signed), signed, False
            spent = self.book.spent(option.asset)
            if signed is not None or not self.limits.agent_pays(option.asset, option.amount,
                                                                spent):
                why = ("this node already sent a payment for this option" if signed is not None
                       else f"{option.price} is above what this node signs for its agent "
                            f"(agent_max, agent_daily_max; "
                            f"{format_amount(spent, option.asset)} paid today)")
                raise AnetError("needs-operator-approval", f"{why}; nothing was signed",
                                hint=f"the operator pays on a terminal: anet pay {task['id']}")
            await self._check_credit(option)
            signed = self._sign(option, quote, Tier.AGENT)
            return payment_message(signed), signed, True

    def tier_of(self, option: Option) -> Tier:
        """Who may pay ``option`` now: the node by itself, its agent, or only the operator."""
        if self.limits.auto_pays(option.asset, option.amount):
            return Tier.AUTO
        if self.limits.agent_pays(option.asset, option.amount, self.book.spent(option.asset)):
            return Tier.AGENT
        return Tier.OPERATOR

    async def _check_credit(self, option: Option) -> None:
        if not await self.credit.holds(option.hub, option.asset, option.amount):
            raise AnetError("rail-not-payable",
                            f"this node holds too little credit at the rail of "
                            f"{option.hub} to pay {option.price}",
                            hint="the hub's operator credits it: anet hub credit <aid> "
                                 "<amount>; `anet balance` shows it")

    # --- helpers ----------------------------------------------------------------------------

    def _payable(self, quote: Quote, task_id: str, peer: str) -> list[Option]:
        options = []
        for raw in quote.accepts:
            try:
                options.append(read_option(raw, task_id=task_id, peer=peer))
            except ReasonError as refused:
                log.info("event=option-unpayable task=%s problem=%r", task_id, refused.message)
        return options

    def _sign(self, option: Option, quote: Quote, tier: Tier) -> Signed:
        from x402.schemas import PaymentPayload

        validity = int(option.raw.get("maxTimeoutSeconds") or DEFAULT_VALIDITY_S)
        authorization = sign_authorization(
            self._identity, payee=option.payee, network=option.raw["network"],
            asset=option.asset, amount=option.amount, task=option.task, valid_for_s=validity)
        payload: dict[str, Any] = {"x402Version": 2, "accepted": option.raw,
                                   "payload": {"authorization": authorization}}
        if "resource" in quote.required:
            payload["resource"] = quote.required["resource"]
        PaymentPayload.model_validate(payload)
        signed = Signed(nonce=authorization["nonce"], task_id=option.task, tier=tier,
                        asset=option.asset, amount=option.amount, payload=payload)
        self.book.record(signed, option.raw, valid_before=authorization["validBefore"])
        log.info("event=payment-signed task=%s tier=%s amount=%s", option.task, tier.value,
                 option.price)
        return signed

    def _pay(self, turn: RequesterTurn, option: Option, quote: Quote, tier: Tier,
             base: dict[str, Any] | None = None) -> TurnAnswer:
        signed = self._sign(option, quote, tier)
        return TurnAnswer(send=payment_message(signed, base),
                          evidence=(authorize_record(signed, turn.peer_aid, option),))

    def _hold(self, turn: RequesterTurn, quote: Quote | None, reason: Reason, message_id: str,
              status: PaymentState, sentence: str) -> TurnAnswer:
        metadata: dict[str, Any] = {PAYMENT_STATUS: status.value}
        if quote is not None:
            metadata[PAYMENT_REQUIRED] = quote.required  # the quote remains
        log.info("event=payment-held task=%s reason=%s", turn.task_id, reason.value)
        return TurnAnswer(hold=reason, status={"messageId": message_id,
                                               "parts": [{"text": sentence}],
                                               "metadata": metadata},
                          evidence=(("payment.refuse", {"taskId": turn.task_id,
                                                        "peer": turn.peer_aid,
                                                        "reason": reason.value,
                                                        "status": status.value}),))


def _numbered(task: dict[str, Any], peer: str, index: int | None) -> tuple[Quote, Option]:
    """The task's quote and its option ``index`` (the only one when None), as a person or a
    tool names it by number."""
    quote = quote_of(task)
    if quote is None:
        raise AnetError("no-quote", f"task {task['id']} waits for no payment",
                        hint="`anet task <id>` shows what it waits for")
    if index is None and len(quote.accepts) != 1:
        raise AnetError("option-needed", f"the quote has {len(quote.accepts)} options",
                        hint="name one by its number (`anet pay <task-id>` lists them)")
    chosen = 0 if index is None else index
    if not 0 <= chosen < len(quote.accepts):
        raise AnetError("option-not-offered", f"the quote has no option {chosen}",
                        hint=f"use 0..{len(quote.accepts) - 1}")
    return quote, read_option(quote.accepts[chosen], task_id=task["id"], peer=peer)


def authorize_record(signed: Signed, peer: str, option: Option) -> tuple[str, dict[str, Any]]:
    """The evidence record of a signature."""
    return ("payment.authorize", {"taskId": signed.task_id, "peer": peer,
                                  "tier": signed.tier.value, "asset": signed.asset,
                                  "amount": str(signed.amount), "network": option.raw["network"],
                                  "nonce": signed.nonce})
