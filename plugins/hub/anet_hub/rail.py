"""The hub as a payment rail: an x402 facilitator (verify, settle, supported) over its ledger.

A provider hands the hub what the requester's node signed (an x402 ``PaymentPayload`` whose
``payload`` is ``{"authorization": <PaymentAuthorization>}``) with the ``PaymentRequirements``
it quoted; the hub checks one against the other and against the payer's key history in its
directory, and settles by moving the amount in its ledger (anet_hub.ledger), returning a
settlement it signs. Every x402 object is a model of the ``x402`` package
(https://github.com/coinbase/x402); both payload generations are accepted, v2 is emitted.

A refusal is data: ``VerifyResponse(is_valid=False, invalid_reason=…)`` or
``SettleResponse(success=False, error_reason=…)``, the reason a snake_case word as in x402
(:class:`RailReason`), the message naming the value. docs/payments.md lists them.
"""

from __future__ import annotations

import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from pydantic import ValidationError
from x402.schemas import (
    PaymentPayload,
    PaymentPayloadV1,
    PaymentRequirements,
    PaymentRequirementsV1,
    SettleResponse,
    SupportedKind,
    SupportedResponse,
    VerifyResponse,
    parse_payment_payload,
    parse_payment_requirements,
)

from anet_core.api import Identity, VerifiedHistory, is_aid, verify_history
from anet_core.protocol.amounts import (
    ASSET_DECIMALS,
    RAIL_SCHEME,
    PaymentError,
    asset_decimals,
    format_amount,
    rail_network,
)
from anet_core.protocol.payments import (
    PaymentAuthorization,
    sign_settlement,
    verify_authorization,
    verify_balance_request,
    verify_void_request,
)
from anet_hub.ledger import (
    AlreadySettled,
    Insufficient,
    LedgerEntry,
    PayeeFull,
    Settled,
    Transfer,
    Voided,
)
from anet_hub.storage import HubStorage


class RailReason(StrEnum):
    """Why the rail refuses a payment (``invalidReason`` / ``errorReason``)."""

    INVALID_PAYLOAD = "invalid_payload"
    INVALID_X402_VERSION = "invalid_x402_version"
    UNSUPPORTED_SCHEME = "unsupported_scheme"
    INVALID_NETWORK = "invalid_network"
    INVALID_PAYMENT_REQUIREMENTS = "invalid_payment_requirements"
    REQUIREMENTS_MISMATCH = "requirements_mismatch"
    UNKNOWN_ASSET = "unknown_asset"
    TOO_MANY_DECIMALS = "too_many_decimals"
    UNKNOWN_PAYER = "unknown_payer"
    INVALID_SIGNATURE = "invalid_signature"
    AUTHORIZATION_EXPIRED = "authorization_expired"
    AUTHORIZATION_NOT_YET_VALID = "authorization_not_yet_valid"
    AUTHORIZATION_WINDOW_TOO_LONG = "authorization_window_too_long"
    RECIPIENT_MISMATCH = "recipient_mismatch"
    TASK_MISMATCH = "task_mismatch"
    AMOUNT_MISMATCH = "amount_mismatch"
    ASSET_MISMATCH = "asset_mismatch"
    NONCE_ALREADY_USED = "nonce_already_used"
    AUTHORIZATION_VOIDED = "authorization_voided"
    INSUFFICIENT_FUNDS = "insufficient_funds"
    PAYEE_BALANCE_LIMIT = "payee_balance_limit"


_DOCUMENT_REASONS = {
    "authorization-expired": RailReason.AUTHORIZATION_EXPIRED,
    "authorization-not-yet-valid": RailReason.AUTHORIZATION_NOT_YET_VALID,
    "authorization-window-too-long": RailReason.AUTHORIZATION_WINDOW_TOO_LONG,
    "authorization-invalid": RailReason.INVALID_PAYLOAD,
    "authorization-malformed": RailReason.INVALID_PAYLOAD,
    "unknown-asset": RailReason.UNKNOWN_ASSET,
    "not-a-rail": RailReason.INVALID_NETWORK,
}
"""``PaymentError`` reasons of ``verify_authorization`` → rail reasons; every other one is a
signature that does not verify (bad signature, wrong signer, unknown or revoked key)."""


class Refused(Exception):
    """A payment the rail does not accept; ``payer`` when it is known."""

    def __init__(self, reason: RailReason, message: str, payer: str | None = None, *,
                 original: LedgerEntry | None = None) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message
        self.payer = payer
        self.original = original
        """The earlier transfer of a replayed authorization."""


@dataclass(frozen=True)
class Terms:
    """The requirements a provider quoted, whichever x402 generation carried them."""

    scheme: str
    network: str
    asset: str
    amount: str
    pay_to: str
    extra: dict[str, Any]


@dataclass(frozen=True)
class Checked:
    authorization: PaymentAuthorization
    document: dict[str, Any]
    terms: Terms

    @property
    def amount(self) -> int:
        return int(self.authorization.amount)


def _terms(requirements: PaymentRequirements | PaymentRequirementsV1) -> Terms:
    if isinstance(requirements, PaymentRequirementsV1):
        return Terms(requirements.scheme, requirements.network, requirements.asset,
                     requirements.max_amount_required, requirements.pay_to,
                     requirements.extra or {})
    return Terms(requirements.scheme, requirements.network, requirements.asset,
                 requirements.amount, requirements.pay_to, requirements.extra)


def _first_error(error: ValidationError) -> str:
    first = error.errors()[0]
    return f"{'.'.join(map(str, first['loc'])) or '(top)'}: {first['msg']}"


def _atomic(amount: object, what: str, asset: str) -> int:
    """A positive whole number of the asset's smallest unit, or :class:`Refused`."""
    if isinstance(amount, str) and "." in amount:
        raise Refused(RailReason.TOO_MANY_DECIMALS,
                      f"the {what} amount {amount!r} has decimals; amounts on a hub rail are "
                      f"whole numbers of {asset}'s smallest unit ({asset} has "
                      f"{ASSET_DECIMALS.get(asset, '?')} decimals: 0.05 {asset} is written 5)")
    if not isinstance(amount, str) or not amount.isdigit() or int(amount) <= 0:
        raise Refused(RailReason.INVALID_PAYMENT_REQUIREMENTS,
                      f"the {what} amount {amount!r} is not a positive whole number of "
                      f"{asset}'s smallest unit")
    return int(amount)


class HubRail:
    """The facilitator of this hub's rail: ``network`` is ``anet:<hub AID>``."""

    def __init__(self, identity: Identity, storage: HubStorage, *,
                 clock: Callable[[], float] = time.time) -> None:
        self.identity = identity
        self.storage = storage
        self.network = rail_network(identity.aid)
        self._clock = clock

    # -- the x402 facilitator interface -------------------------------------------------------

    async def supported(self) -> SupportedResponse:
        extra = {"assets": dict(ASSET_DECIMALS)}
        return SupportedResponse(kinds=[
            SupportedKind(x402_version=version, scheme=RAIL_SCHEME, network=self.network,
                          extra=extra) for version in (2, 1)])

    async def verify(self, body: object) -> VerifyResponse:
        """Whether ``body`` (``{x402Version, paymentPayload, paymentRequirements}``) would
        settle now. Moves nothing."""
        try:
            checked = await self._check(body)
            balance = await self.storage.ledger.balance(checked.authorization.payer,
                                                        checked.authorization.asset)
            if balance < checked.amount:
                raise self._insufficient(checked, balance)
        except Refused as refused:
            return VerifyResponse(is_valid=False, invalid_reason=refused.reason.value,
                                  invalid_message=refused.message, payer=refused.payer)
        return VerifyResponse(is_valid=True, payer=checked.authorization.payer)

    async def settle(self, body: object) -> SettleResponse:
        """The checks of :meth:`verify`, then the amount moved once, in one transaction."""
        try:
            checked = await self._check(body)
            authorization = checked.authorization
            now = self._clock()
            transaction = f"anet-tx-{secrets.token_hex(16)}"
            settlement = sign_settlement(self.identity, authorization, transaction=transaction,
                                         now=int(now))
            outcome = await self.storage.ledger.settle(Transfer(
                payer=authorization.payer, payee=authorization.payee, asset=authorization.asset,
                amount=checked.amount, nonce=authorization.nonce, task=authorization.task,
                transaction=transaction, authorization=checked.document, settlement=settlement,
                created=now))
            match outcome:
                case Settled(entry):
                    return self._settled(entry)
                case AlreadySettled(entry):  # a concurrent settlement of the same nonce won
                    raise self._replayed(entry)
                case Voided() as voided:  # the payer's void won, just now
                    raise self._voided(authorization.payer, authorization.nonce, voided)
                case Insufficient(balance):
                    raise self._insufficient(checked, balance)
                case PayeeFull(balance):
                    raise Refused(RailReason.PAYEE_BALANCE_LIMIT,
                                  f"the payee {authorization.payee} holds "
                                  f"{format_amount(balance, authorization.asset)} "
                                  f"{authorization.asset}, the most a balance may hold; it "
                                  "spends before it is paid more", authorization.payer)
        except Refused as refused:
            original = refused.original
            return SettleResponse(
                success=False, error_reason=refused.reason.value, error_message=refused.message,
                payer=refused.payer, transaction=original.transaction if original else "",
                network=self.network, amount=str(original.amount) if original else None,
                extra={"settlement": original.settlement} if original else None)

    # -- balances -----------------------------------------------------------------------------

    async def balance(self, request: object) -> tuple[str, dict[str, str]]:
        """The AID that signed ``request`` (a balance request) and its balances as decimal
        strings. Raises :class:`PaymentError` (``unknown-agent`` or the request's reason)."""
        history = await self._balance_requester(request, "asks for its balance")
        balances = await self.storage.ledger.balances(history.aid)
        return history.aid, {item.asset: format_amount(item.amount, item.asset)
                             for item in balances if item.asset in ASSET_DECIMALS}

    async def ledger(self, request: object, *, after_seq: int,
                     limit: int) -> tuple[str, list[LedgerEntry]]:
        """The AID that signed ``request`` (a balance request: it proves the AID) and the
        ledger's entries of it, ``seq`` above ``after_seq``, at most ``limit``: its credits,
        and the transfers it paid or was paid. Raises :class:`PaymentError` as :meth:`balance`
        does."""
        history = await self._balance_requester(request, "asks for its ledger")
        return history.aid, await self.storage.ledger.entries(after_seq=after_seq, limit=limit,
                                                              aid=history.aid)

    # -- voids --------------------------------------------------------------------------------

    async def void(self, request: object) -> tuple[str, str, list[dict[str, Any]]]:
        """The payer that signed ``request`` (a void request), its task, and per nonce what
        the ledger decided: ``{"nonce", "outcome": "voided", "at"}``, or ``{"nonce",
        "outcome": "settled", "transaction", "settlement"}`` when it settled before. Raises
        :class:`PaymentError` (``unknown-agent`` or the request's reason)."""
        history = await self._signer_of(request, "voids what it signed")
        void = verify_void_request(request, history, hub_aid=self.identity.aid,
                                   now=int(self._clock()))
        decided = []
        for nonce in dict.fromkeys(void.nonces):
            match await self.storage.ledger.void(history.aid, nonce, task=void.task,
                                                 now=self._clock()):
                case AlreadySettled(entry):
                    decided.append({"nonce": nonce, "outcome": "settled",
                                    "transaction": entry.transaction,
                                    "settlement": entry.settlement})
                case Voided(at):
                    decided.append({"nonce": nonce, "outcome": "voided", "at": at})
        return history.aid, void.task, decided

    # -- the checks ---------------------------------------------------------------------------

    async def _balance_requester(self, request: object, does: str) -> VerifiedHistory:
        """The key history of the agent that signed ``request``, a balance request for this hub
        (for its balance and for its ledger)."""
        history = await self._signer_of(request, does)
        verify_balance_request(request, history, hub_aid=self.identity.aid,
                               now=int(self._clock()))
        return history

    async def _signer_of(self, request: object, does: str) -> VerifiedHistory:
        """The key history of the agent that says it signed ``request``; :class:`PaymentError`
        ``unknown-agent`` when this hub knows no such agent."""
        if not isinstance(request, dict) or "signer" not in request:
            raise PaymentError("bad-request", "the request has no signer: a node signs it with "
                                              "its own key (anet_core.protocol.payments)")
        signer = request["signer"]
        history = await self._history(signer) if is_aid(signer) else None
        if history is None:
            raise PaymentError("unknown-agent", f"{str(signer)[:80]!r} is not an agent this hub "
                                                f"knows; a node {does} at its home hub, signed "
                                                "with its own key")
        return history

    async def _history(self, aid: str) -> VerifiedHistory | None:
        record = await self.storage.get_agent(aid)
        return None if record is None else verify_history(record.history, expected_aid=aid)

    def _settled(self, entry: LedgerEntry) -> SettleResponse:
        return SettleResponse(success=True, payer=entry.payer, transaction=entry.transaction,
                              network=self.network, amount=str(entry.amount),
                              extra={"settlement": entry.settlement})

    @staticmethod
    def _replayed(original: LedgerEntry) -> Refused:
        return Refused(RailReason.NONCE_ALREADY_USED,
                       f"the nonce {original.nonce} of {original.payer} was settled before "
                       f"(transaction {original.transaction}, task {original.task}); nothing "
                       "moved again", original.payer, original=original)

    @staticmethod
    def _voided(payer: str, nonce: str, voided: Voided) -> Refused:
        return Refused(RailReason.AUTHORIZATION_VOIDED,
                       f"the payer {payer} withdrew the authorization {nonce} (task "
                       f"{voided.task}) at {voided.at:.0f}: its task was canceled; nothing "
                       "moved", payer)

    @staticmethod
    def _insufficient(checked: Checked, balance: int) -> Refused:
        asset = checked.authorization.asset
        return Refused(RailReason.INSUFFICIENT_FUNDS,
                       f"{checked.authorization.payer} holds {format_amount(balance, asset)} "
                       f"{asset} at this hub and the payment is "
                       f"{format_amount(checked.amount, asset)} {asset}; the hub's operator "
                       "credits it with `anet hub credit`", checked.authorization.payer)

    async def _check(self, body: object) -> Checked:
        payload, terms = self._parse(body)
        document = payload.payload.get("authorization")
        if not isinstance(document, dict):
            raise Refused(RailReason.INVALID_PAYLOAD,
                          "the payload carries no authorization: a hub rail's payload is "
                          "{\"authorization\": <the payer's signed authorization>}")
        payer = document.get("payer")
        if "amount" in document:
            _atomic(document["amount"], "authorization's", terms.asset)
        history = await self._history(payer) if is_aid(payer) else None
        if history is None:
            raise Refused(RailReason.UNKNOWN_PAYER,
                          f"the payer {str(payer)[:80]!r} is not an agent of this hub; a node "
                          "pays at its home hub")
        nonce = document.get("nonce")
        # Before the window: a payee that lost the answer of its settlement asks again, maybe
        # after the authorization expired, and recovers the settlement.
        decided = await self.storage.ledger.decision(history.aid, nonce) \
            if isinstance(nonce, str) else None
        if isinstance(decided, AlreadySettled):
            raise self._replayed(decided.entry)
        if isinstance(decided, Voided):
            raise self._voided(history.aid, str(nonce), decided)
        try:
            authorization = verify_authorization(document, history, now=int(self._clock()))
        except PaymentError as error:
            reason = _DOCUMENT_REASONS.get(error.reason, RailReason.INVALID_SIGNATURE)
            raise Refused(reason, error.message, history.aid) from None
        self._match(authorization, terms)
        return Checked(authorization, document, terms)

    def _parse(self, body: object) -> tuple[PaymentPayload | PaymentPayloadV1, Terms]:
        if not isinstance(body, dict):
            raise Refused(RailReason.INVALID_PAYLOAD, "the request is not a JSON object with "
                                                      "x402Version, paymentPayload and "
                                                      "paymentRequirements")
        raw_payload, raw_requirements = body.get("paymentPayload"), body.get("paymentRequirements")
        if not isinstance(raw_payload, dict) or not isinstance(raw_requirements, dict):
            raise Refused(RailReason.INVALID_PAYLOAD, "the request needs paymentPayload and "
                                                      "paymentRequirements, both JSON objects")
        version = raw_payload.get("x402Version")
        if version not in (1, 2):
            raise Refused(RailReason.INVALID_X402_VERSION,
                          f"the payload's x402Version {version!r} is not 1 or 2")
        if body.get("x402Version") != version:
            raise Refused(RailReason.INVALID_X402_VERSION,
                          f"the request's x402Version {body.get('x402Version')!r} is not the "
                          f"payload's ({version}); send the version of the payload")
        try:
            payload = parse_payment_payload(raw_payload)
        except (ValidationError, ValueError) as error:
            detail = _first_error(error) if isinstance(error, ValidationError) else str(error)
            raise Refused(RailReason.INVALID_PAYLOAD, f"the payment payload is invalid at "
                                                      f"{detail}") from None
        try:
            terms = _terms(parse_payment_requirements(version, raw_requirements))
        except (ValidationError, ValueError) as error:
            detail = _first_error(error) if isinstance(error, ValidationError) else str(error)
            raise Refused(RailReason.INVALID_PAYMENT_REQUIREMENTS,
                          f"the payment requirements are invalid at {detail}") from None
        self._check_terms(payload, terms)
        return payload, terms

    def _check_terms(self, payload: PaymentPayload | PaymentPayloadV1, terms: Terms) -> None:
        if isinstance(payload, PaymentPayload):
            accepted = _terms(payload.accepted)
            for name in ("scheme", "network", "asset", "amount", "pay_to"):
                if getattr(accepted, name) != getattr(terms, name):
                    raise Refused(RailReason.REQUIREMENTS_MISMATCH,
                                  f"the payload accepted {name} {getattr(accepted, name)!r}, "
                                  f"and the requirements say {getattr(terms, name)!r}: the "
                                  "payer signed for another quote")
            if accepted.extra.get("task") != terms.extra.get("task"):
                raise Refused(RailReason.REQUIREMENTS_MISMATCH,
                              f"the payload accepted task {accepted.extra.get('task')!r}, and "
                              f"the requirements say {terms.extra.get('task')!r}")
            scheme, network = accepted.scheme, accepted.network
        else:
            scheme, network = payload.scheme, payload.network
        if scheme != RAIL_SCHEME or terms.scheme != RAIL_SCHEME:
            raise Refused(RailReason.UNSUPPORTED_SCHEME,
                          f"the scheme {scheme!r} is not settled here; a hub rail settles "
                          f"{RAIL_SCHEME!r}")
        if network != self.network or terms.network != self.network:
            raise Refused(RailReason.INVALID_NETWORK,
                          f"the network {terms.network!r} is not this hub's rail "
                          f"{self.network!r}; settle at the hub the network names")
        try:
            asset_decimals(terms.asset)
        except PaymentError as error:
            raise Refused(RailReason.UNKNOWN_ASSET, error.message) from None
        _atomic(terms.amount, "requirements'", terms.asset)
        task = terms.extra.get("task")
        if not isinstance(task, str) or not task:
            raise Refused(RailReason.INVALID_PAYMENT_REQUIREMENTS,
                          f"the requirements' extra.task {task!r} does not name the task the "
                          "payment is for")
        if not is_aid(terms.pay_to):
            raise Refused(RailReason.INVALID_PAYMENT_REQUIREMENTS,
                          f"the requirements' payTo {terms.pay_to[:80]!r} is not an AID")

    @staticmethod
    def _match(authorization: PaymentAuthorization, terms: Terms) -> None:
        payer = authorization.payer
        checks = (
            (RailReason.INVALID_NETWORK, "network", authorization.network, terms.network),
            (RailReason.RECIPIENT_MISMATCH, "payee", authorization.payee, terms.pay_to),
            (RailReason.TASK_MISMATCH, "task", authorization.task, terms.extra.get("task")),
            (RailReason.ASSET_MISMATCH, "asset", authorization.asset, terms.asset),
            (RailReason.AMOUNT_MISMATCH, "amount", authorization.amount, terms.amount),
        )
        for reason, name, signed, asked in checks:
            if signed != asked:
                raise Refused(reason, f"the authorization's {name} is {signed!r}, and the "
                                      f"requirements ask for {asked!r}", payer)
