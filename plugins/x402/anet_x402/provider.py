"""The payee's side of a priced skill (docs/payments.md, "Charging for skills").

A new task for a priced skill is held by this module's gate (``anet_task_gate``): it waits for
input with a quote (``payment-required``). The requester's answer with ``payment-submitted`` and
a payload is checked here against the quote (the option offered exactly; the authorization's
payee, task, amount, asset and network), then verified at the option's rail; a valid payment
moves the task on to the modules or the inbox (``payment-verified``). A retryable refusal (the
rail unreachable, the authorization expired) quotes again; any other is ``payment-failed``.
When the work ends (``anet_task_ending``) the payment settles at that rail and the final status
carries ``x402.payment.receipts``, each attempt appended; a failed settlement ends the task as
failed, the work's artifacts withheld.

The payment's progress is in the module's :class:`PaymentBook`; the end of the work is written
there before each settlement, so a node stopped meanwhile finishes the task when it starts again
(the rail answers a settled nonce with the original settlement: nothing moves twice). A quote
is honoured until its task ends, even if the price changed since (it is what the requester saw).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import defaultdict
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from anet_core.api import (
    DataPaths,
    EndingTask,
    GateAction,
    GateVerdict,
    InboundTask,
    Node,
    ReasonError,
    TaskGate,
    is_aid,
)
from anet_core.protocol.tasks import ANY_SKILL
from anet_x402.config import X402Config
from anet_x402.extension import (
    PAYMENT_ERROR,
    PAYMENT_PAYLOAD,
    PAYMENT_RECEIPTS,
    PAYMENT_REQUIRED,
    PAYMENT_STATUS,
    PaymentState,
)
from anet_x402.prices import Rail, dumped, home_rail, price_of, quote, reachable_rails
from anet_x402.quotes import Payment, PaymentBook, PaymentStatus
from anet_x402.rail import RailClient, RailError, again_while_unreachable, settlement_problem

if TYPE_CHECKING:  # x402's models load at the first paid task (docs/performance.md, "Idle memory")
    from x402.schemas import PaymentRequired, PaymentRequirements

log = logging.getLogger(__name__)

MODULE = "x402"
COMPLETED = "TASK_STATE_COMPLETED"
UNREACHABLE = "rail_unreachable"
RETRYABLE = frozenset({"authorization_expired", UNREACHABLE})
"""Refusals a fresh payment can overcome: answered with a new quote, not a failure."""
VOIDED = "authorization_voided"
"""The payer withdrew the payment at the rail as it canceled the task: the task ends canceled."""
SETTLE_ATTEMPTS = 3
SETTLE_RETRY_S = 1.0
UNREACHABLE_RETRY_S = 10.0
"""After the attempts of one settlement found the rail unreachable: when to try again."""


class PaymentDesk:
    """What the payee keeps while the node runs: the book, and one lock per task so that one
    task's payment is never settled twice at once."""

    def __init__(self, node: Node, book: PaymentBook) -> None:
        self._node = node
        self._book = book
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)
        self._retries: dict[str, asyncio.Task[None]] = {}
        self._again: dict[str, float] = {}
        """Retries that asked, from inside themselves, for one more round: after that delay."""

    @property
    def config(self) -> X402Config:
        return self._node.config.module(MODULE, X402Config)

    # --- the gate: quote, check, verify ---------------------------------------------------------

    def gate(self, task: InboundTask) -> TaskGate | None:
        if not is_aid(task.peer_aid):
            return None  # a local caller of this node's own surface pays nobody
        if not task.continued:
            price = price_of(self.config.prices, task.skill)
            return None if price is None else TaskGate(MODULE, verdict=self._quote(
                task, "Payment is required for this skill."))
        offered = quoted(task.question)
        if offered is None:
            return None
        metadata = task.message.get("metadata") or {}
        state = metadata.get(PAYMENT_STATUS)
        if state == PaymentState.REJECTED:
            return TaskGate(MODULE, verdict=self._failed(task, "payment_rejected",
                                                         "The requester declined to pay."))
        if state != PaymentState.SUBMITTED:
            return TaskGate(MODULE, verdict=self._quote(
                task, "This skill is paid: answer with x402.payment.status payment-submitted "
                      "and x402.payment.payload.", offered=offered))
        try:
            option, payload = matched(offered, metadata.get(PAYMENT_PAYLOAD), task.task_id)
        except ReasonError as error:
            return TaskGate(MODULE, verdict=self._failed(task, error.reason, error.message))

        async def check() -> GateVerdict:
            return await self._verify(task, offered, option, payload)

        return TaskGate(MODULE, check=check)

    def _quote(self, task: InboundTask, error: str, *,
               offered: PaymentRequired | None = None) -> GateVerdict:
        """The task waits for a payment; ``offered`` (the quote it already has) stands, else a
        new quote at the configured price."""
        if offered is None:
            price = price_of(self.config.prices, task.skill)
            if price is None:
                return self._failed(task, "not_priced",
                                    f"The skill {task.skill or ANY_SKILL} has no price here any "
                                    "more; send the task again.")
            rails = reachable_rails(price, home_rail(self._node.paths),
                                    self.config.rail_urls)
            if not rails:
                return self._failed(task, UNREACHABLE,
                                    f"The skill {task.skill} is priced, but this agent can reach "
                                    "none of its rails now; try again later.")
            offered = quote(task.skill or ANY_SKILL, price, rails, payee=self._node.aid,
                            task_id=task.task_id, error=error)
        else:
            offered = offered.model_copy(update={"error": error})
        required = dumped(offered)
        return GateVerdict(
            GateAction.HOLD,
            {"parts": [{"text": error}],
             "metadata": {PAYMENT_STATUS: PaymentState.REQUIRED.value, PAYMENT_REQUIRED: required}},
            records=(("payment.quote", {"taskId": task.task_id, "peer": task.peer_aid,
                                        "skill": task.skill, "accepts": required["accepts"]}),))

    def _failed(self, task: InboundTask, error: str, text: str, *,
                receipts: list[dict[str, Any]] | None = None) -> GateVerdict:
        metadata: dict[str, Any] = {PAYMENT_STATUS: PaymentState.FAILED.value,
                                    PAYMENT_ERROR: error}
        if receipts is not None:
            metadata[PAYMENT_RECEIPTS] = receipts
        return GateVerdict(GateAction.FAIL, {"parts": [{"text": text}], "metadata": metadata},
                           records=(("payment.refuse", {"taskId": task.task_id,
                                                        "peer": task.peer_aid, "error": error,
                                                        "message": text}),))

    async def _verify(self, task: InboundTask, offered: PaymentRequired,
                      option: PaymentRequirements, payload: dict[str, Any]) -> GateVerdict:
        rail = self._rail(option.network)
        requirements = dumped(option)
        if rail is None:  # the node joined another hub since it quoted
            if price_of(self.config.prices, task.skill) is not None:
                return self._quote(task, f"The rail {option.network} cannot be reached now; "
                                         "here is a new quote.")
            return self._failed(task, "invalid_network", f"This agent cannot settle at "
                                                         f"{option.network} any more.")
        from x402.schemas import PaymentPayload

        try:
            async with RailClient(rail.http_url) as client:
                answer = await client.verify(PaymentPayload.model_validate(payload), option)
        except RailError as error:
            log.info("event=verify-unreachable task=%s rail=%s", task.task_id, rail.http_url)
            return self._requote(task, offered, UNREACHABLE, error.message)
        if not answer.is_valid:
            reason = answer.invalid_reason or "invalid_payload"
            message = answer.invalid_message or f"the rail refused the payment: {reason}"
            if reason in RETRYABLE:
                return self._requote(task, offered, reason, message)
            verdict = self._failed(task, reason, f"Payment refused: {message}")
            if reason == VOIDED:
                return GateVerdict(GateAction.CANCEL, verdict.message, verdict.records)
            return verdict
        self._book.verified(task.task_id, task.peer_aid, requirements, payload)
        log.info("event=payment-verified task=%s payer=%s amount=%s asset=%s", task.task_id,
                 answer.payer, option.amount, option.asset)
        return GateVerdict(
            GateAction.PASS,
            {"parts": [{"text": "Payment verified; the work starts."}],
             "metadata": {PAYMENT_STATUS: PaymentState.VERIFIED.value}},
            records=(("payment.verify", {"taskId": task.task_id, "peer": task.peer_aid,
                                         "payer": answer.payer, "network": option.network,
                                         "asset": option.asset, "amount": option.amount}),))

    def _requote(self, task: InboundTask, offered: PaymentRequired, reason: str,
                 message: str) -> GateVerdict:
        verdict = self._quote(task, f"Payment not taken ({reason}: {message}); pay again.",
                              offered=offered)
        refusal = ("payment.refuse", {"taskId": task.task_id, "peer": task.peer_aid,
                                      "error": reason, "message": message, "requoted": True})
        return GateVerdict(verdict.action, verdict.message, records=(refusal, *verdict.records))

    def _rail(self, network: str) -> Rail | None:
        home = home_rail(self._node.paths)
        if home is not None and home.network == network:
            return home
        return next((Rail(hub_aid=aid, http_url=url.rstrip("/"))
                     for aid, url in self.config.rail_urls.items()
                     if Rail(hub_aid=aid, http_url=url).network == network), None)

    # --- the end of the work: settle ------------------------------------------------------------

    async def settle(self, task: EndingTask) -> GateVerdict:
        async with self._locks[task.task_id]:
            try:
                return await self._settle(task)
            finally:
                self._locks.pop(task.task_id, None)

    async def _settle(self, task: EndingTask) -> GateVerdict:
        payment = self._book.get(task.task_id)
        if payment is None:
            return GateVerdict(GateAction.FAIL, "The agent has no payment on record for this "
                                                "task; nothing was charged.")
        pending = payment.status in (PaymentStatus.SETTLING, PaymentStatus.SETTLED)
        if pending and payment.outcome is not None and task.outcome != payment.outcome:
            # The work's end is recorded and waits for its settlement: that end, not this one.
            self._retry_later(payment, delay_s=0.0)
            return GateVerdict(GateAction.HOLD)
        if payment.status is PaymentStatus.SETTLED:
            return completed(payment)
        if payment.status is PaymentStatus.FAILED:
            return self._settle_failed(task, payment)
        if task.state != COMPLETED:
            payment.status, payment.error = PaymentStatus.FAILED, "work_not_completed"
            self._book.save(payment)
            return GateVerdict(GateAction.PASS, {"parts": [{"text": "Nothing was charged."}],
                                                 "metadata": payment_metadata(payment)},
                               records=(("payment.refuse", {
                                   "taskId": task.task_id, "peer": task.peer_aid,
                                   "error": payment.error, "state": task.state}),))
        payment.status, payment.outcome = PaymentStatus.SETTLING, task.outcome
        self._book.save(payment)
        receipt = await self._settle_at_rail(payment)
        first_miss = add_receipt(payment.receipts, receipt, now=int(time.time()))
        if receipt.get("errorReason") == UNREACHABLE:
            # The hub may have settled and its answer been lost: the end waits until the rail
            # answers (then the settlement, or the original one, or a clear refusal).
            self._book.save(payment)
            self._retry_later(payment, delay_s=UNREACHABLE_RETRY_S)
            return GateVerdict(GateAction.HOLD, records=(("payment.settle", {
                "taskId": task.task_id, "peer": task.peer_aid, "success": False,
                "error": UNREACHABLE, "retry": True}),) if first_miss else ())
        if receipt.get("success"):
            payment.status, payment.error = PaymentStatus.SETTLED, None
        else:
            payment.status = PaymentStatus.FAILED
            payment.error = receipt.get("errorReason") or "settlement_failed"
        self._book.save(payment)
        record = ("payment.settle", {"taskId": task.task_id, "peer": task.peer_aid,
                                     "success": bool(receipt.get("success")),
                                     "transaction": receipt.get("transaction", ""),
                                     "network": receipt.get("network"),
                                     "amount": payment.accepted.get("amount"),
                                     "asset": payment.accepted.get("asset"),
                                     "error": payment.error})
        if payment.status is PaymentStatus.SETTLED:
            verdict = completed(payment)
            settlement = receipt.get("extra", {}).get("settlement")
            return GateVerdict(verdict.action, verdict.message, records=(
                record, ("payment.receipt", {"taskId": task.task_id, "settlement": settlement})))
        failed = self._settle_failed(task, payment)
        return GateVerdict(failed.action, failed.message, records=(record,))

    def _retry_later(self, payment: Payment, *, delay_s: float) -> None:
        """Give the recorded end again after ``delay_s`` (one retry per task at a time). Asked
        from inside that retry (the rail is still unreachable), it goes round once more: the
        end must not wait for the node's next start."""
        if payment.outcome is None:
            return
        task_id, outcome = payment.task_id, payment.outcome
        pending = self._retries.get(task_id)
        if pending is not None:
            if pending is asyncio.current_task():
                self._again[task_id] = delay_s
            return

        async def retry() -> None:
            try:
                wait_s: float | None = delay_s
                while wait_s is not None:
                    await asyncio.sleep(wait_s)
                    await self._node.tasks.end_received(task_id, outcome)
                    wait_s = self._again.pop(task_id, None)
            finally:
                self._retries.pop(task_id, None)
                self._again.pop(task_id, None)

        self._retries[task_id] = asyncio.get_running_loop().create_task(retry())

    async def close(self) -> None:
        for retry in list(self._retries.values()):
            retry.cancel()
        await asyncio.gather(*self._retries.values(), return_exceptions=True)

    def _settle_failed(self, task: EndingTask, payment: Payment) -> GateVerdict:
        if payment.error == VOIDED:
            return GateVerdict(GateAction.CANCEL, {
                "parts": [{"text": "The requester canceled the task and withdrew its payment; "
                                   "the result is withheld and nothing was charged."}],
                "metadata": payment_metadata(payment)})
        return GateVerdict(GateAction.FAIL, {
            "parts": [{"text": f"The payment did not settle ({payment.error}); the result is "
                               "withheld and nothing was charged."}],
            "metadata": payment_metadata(payment)})

    async def _settle_at_rail(self, payment: Payment) -> dict[str, Any]:
        """One settle attempt (retried while the rail is unreachable), as the receipt to
        append: the rail's SettleResponse; the original settlement the rail returns for a
        nonce it settled before counts as this one's."""
        from x402.schemas import PaymentPayload, PaymentRequirements, SettleResponse

        network = str(payment.accepted.get("network"))
        rail = self._rail(network)
        if rail is None:
            return unsettled(network, "invalid_network", f"this agent cannot reach {network}")
        async def settle() -> SettleResponse:
            async with RailClient(rail.http_url) as client:
                return await client.settle(PaymentPayload.model_validate(payment.payload),
                                           PaymentRequirements.model_validate(payment.accepted))

        try:
            answer = await again_while_unreachable(
                settle, attempts=SETTLE_ATTEMPTS, pause_s=SETTLE_RETRY_S,
                what=f"settle task={payment.task_id}")
        except RailError:
            return unsettled(network, UNREACHABLE, f"the rail at {rail.http_url} did not "
                                                   "answer")
        settlement = (answer.extra or {}).get("settlement")
        if not answer.success and answer.error_reason != "nonce_already_used":
            return dumped(answer)
        problem = self._check_settlement(settlement, payment)
        if problem is not None:
            return unsettled(network, "settlement_unverified", problem)
        if answer.success:
            return dumped(answer)
        log.info("event=settlement-recovered task=%s transaction=%s", payment.task_id,
                 settlement["transaction"])
        return dumped(SettleResponse(
            success=True, payer=settlement["payer"], transaction=settlement["transaction"],
            network=settlement["network"], amount=settlement["amount"],
            extra={"settlement": settlement, "recovered": True}))

    def _check_settlement(self, settlement: Any, payment: Payment) -> str | None:
        """Why the hub's settlement is not this payment's, or None when it is."""
        authorization = payment.payload.get("payload", {}).get("authorization", {})
        return settlement_problem(self._node.paths.hub_pin, settlement, {
            key: authorization.get(key)
            for key in ("nonce", "payee", "amount", "asset", "task", "network")})

    async def finish_interrupted(self) -> None:
        """At start: the work of a paid task ended while the node stopped before the task did:
        settle it (again; the rail returns the original settlement) and end the task."""
        for status in (PaymentStatus.SETTLING, PaymentStatus.SETTLED):
            for payment in self._book.in_status(status):
                task = self._node.tasks.received(payment.task_id)
                if payment.outcome is None or task is None \
                        or task["status"]["state"] in TERMINAL:
                    continue
                log.info("event=paid-task-finishing task=%s status=%s", payment.task_id,
                         payment.status.value)
                await self._node.tasks.end_received(payment.task_id, payment.outcome)


TERMINAL = frozenset({"TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED",
                      "TASK_STATE_REJECTED"})


def quoted(question: dict[str, Any] | None) -> PaymentRequired | None:
    """The quote a waiting task's status message carries, if it is one."""
    metadata = (question or {}).get("metadata") or {}
    if metadata.get(PAYMENT_STATUS) != PaymentState.REQUIRED or PAYMENT_REQUIRED not in metadata:
        return None
    from x402.schemas import PaymentRequired

    try:
        return PaymentRequired.model_validate(metadata[PAYMENT_REQUIRED])
    except ValidationError:
        return None


def matched(offered: PaymentRequired, raw: Any, task_id: str
            ) -> tuple[PaymentRequirements, dict[str, Any]]:
    """The option of ``offered`` the payload ``raw`` pays (v2: ``accepted`` exactly; v1: by
    scheme and network) and the payload as v2, or a refusal naming what does not match."""
    from x402.schemas import PaymentPayload, PaymentPayloadV1, parse_payment_payload

    if not isinstance(raw, dict):
        raise ReasonError("invalid_payload", "x402.payment.payload is missing or not an object")
    try:
        payload = parse_payment_payload(raw)
    except (ValidationError, ValueError) as error:
        raise ReasonError("invalid_payload", f"x402.payment.payload is no x402 PaymentPayload: "
                                         f"{str(error).splitlines()[0]}") from None
    if isinstance(payload, PaymentPayloadV1):
        option = next((option for option in offered.accepts if option.scheme == payload.scheme
                       and option.network == payload.network), None)
        if option is None:
            raise ReasonError("option_not_offered", f"no option of the quote is "
                                                    f"{payload.scheme} on {payload.network}")
        payload = PaymentPayload(x402_version=2, accepted=option, resource=offered.resource,
                                 payload=payload.payload)
    chosen = dumped(payload.accepted)
    option = next((option for option in offered.accepts if dumped(option) == chosen), None)
    if option is None:
        raise ReasonError("option_not_offered", f"the payload pays an option the quote does not "
                                            f"offer: {chosen.get('network')} "
                                            f"{chosen.get('amount')} {chosen.get('asset')} to "
                                            f"{chosen.get('payTo')}")
    authorization = payload.payload.get("authorization")
    if not isinstance(authorization, dict):
        raise ReasonError("invalid_payload", "the payload has no authorization")
    expected = {"payee": (option.pay_to, "recipient_mismatch"),
                "task": (task_id, "task_mismatch"),
                "amount": (option.amount, "amount_mismatch"),
                "asset": (option.asset, "asset_mismatch"),
                "network": (option.network, "invalid_network")}
    for key, (value, reason) in expected.items():
        if authorization.get(key) != value:
            raise ReasonError(reason, f"the authorization's {key} is "
                                  f"{authorization.get(key)!r}; the quote asks for {value!r}")
    return option, dumped(payload)


def add_receipt(receipts: list[dict[str, Any]], receipt: dict[str, Any], *, now: int) -> bool:
    """Append a settle attempt's ``receipt`` to ``receipts``. An attempt that found the rail
    unreachable right after another one is folded into it (``extra``: ``attempts``,
    ``firstAttemptAt``, ``lastAttemptAt``), so that a task waiting for a rail that is down keeps
    one receipt, not one every 10 s. True when the receipt was appended, not folded."""
    if receipt.get("errorReason") != UNREACHABLE:
        receipts.append(receipt)
        return True
    last = receipts[-1] if receipts else {}
    if last.get("errorReason") != UNREACHABLE:
        receipts.append(receipt | {"extra": {"attempts": 1, "firstAttemptAt": now,
                                             "lastAttemptAt": now}})
        return True
    earlier = last.get("extra") or {}
    receipts[-1] = receipt | {"extra": {"attempts": int(earlier.get("attempts", 1)) + 1,
                                        "firstAttemptAt": earlier.get("firstAttemptAt", now),
                                        "lastAttemptAt": now}}
    return False


def payment_metadata(payment: Payment) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        PAYMENT_STATUS: (PaymentState.COMPLETED if payment.status is PaymentStatus.SETTLED
                         else PaymentState.FAILED).value,
        PAYMENT_RECEIPTS: payment.receipts}
    if payment.error:
        metadata[PAYMENT_ERROR] = payment.error
    return metadata


def completed(payment: Payment) -> GateVerdict:
    return GateVerdict(GateAction.PASS, {"parts": [{"text": "Payment completed."}],
                                         "metadata": payment_metadata(payment)})


def unsettled(network: str, reason: str, message: str) -> dict[str, Any]:
    from x402.schemas import SettleResponse

    return dumped(SettleResponse(success=False, error_reason=reason, error_message=message,
                                 transaction="", network=network))


def payments_path(paths: DataPaths) -> Path:
    return paths.module_dir(MODULE) / "payments.sqlite"
