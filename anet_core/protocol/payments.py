"""Payments at a hub rail: what the payer's node, the payee's node and the hub all check.

A hub is a payment rail (docs/payments.md): it keeps a ledger of credit per AID and settles a
payment authorization that the payer's node signed, returning a settlement signed by the hub.
x402 objects (https://github.com/coinbase/x402) carry them. In a ``PaymentRequirements`` for a
rail the ``scheme`` is ``RAIL_SCHEME``, the ``network`` names the hub (``rail_network``), the
``asset`` is a code of ``ASSET_DECIMALS`` (the three in anet_core/protocol/amounts.py), the
``amount`` is in the asset's smallest unit, ``payTo`` is the payee's AID and ``extra["task"]``
the task the payment is for. The ``payload`` of the ``PaymentPayload`` is ``{"authorization":
<signed authorization>}``.

Authorizations, settlements and balance requests are signed documents
(``anet_core.identity.documents``), so their signature covers every field and a key rotation
is handled like everywhere else.
"""

from __future__ import annotations

import secrets
import time
from typing import Annotated, Any, Literal, TypeVar

from pydantic import Field, StringConstraints

from anet_core.identity import Identity, VerifiedHistory, sign_document
from anet_core.protocol.amounts import PaymentError, asset_decimals, rail_hub
from anet_core.protocol.documents import DirectoryDocError, SignedContent, checked_content
from anet_core.protocol.fields import Aid

AUTHORIZATION_TYPE = "anet.payment-authorization/v1"
SETTLEMENT_TYPE = "anet.settlement/v1"
BALANCE_REQUEST_TYPE = "anet.balance-request/v1"
VOID_REQUEST_TYPE = "anet.payment-void/v1"

MAX_VALIDITY_S = 3600
"""The longest validity window an authorization may ask for."""
CLOCK_SKEW_S = 300
"""How far a signed request's time may be from the hub's clock."""

FACILITATOR_PATH = "/x402"
"""Where a hub serves the x402 facilitator interface: ``POST {path}/verify``, ``POST
{path}/settle`` (body ``{x402Version, paymentPayload, paymentRequirements}``), ``GET
{path}/supported``, ``POST {path}/balance`` (body: a signed balance request) and ``POST
{path}/void`` (body: a signed void request)."""
MAX_VOIDED_NONCES = 16
"""The most authorizations one void request withdraws (a task has one, or a few that expired)."""

_ATOMIC = Annotated[str, StringConstraints(pattern=r"^[1-9][0-9]{0,38}$")]
_NONCE = Annotated[str, StringConstraints(pattern=r"^[0-9a-f]{64}$")]
_Word = Annotated[str, StringConstraints(min_length=1, max_length=200)]


class PaymentAuthorization(SignedContent):
    """The payer's signed order to its hub: move ``amount`` of ``asset`` to ``payee`` for
    ``task``, once (``nonce``), between ``validAfter`` and ``validBefore`` (unix seconds)."""

    type: Literal["anet.payment-authorization/v1"]
    payer: Aid
    payee: Aid
    network: _Word
    asset: _Word
    amount: _ATOMIC
    task: _Word
    nonce: _NONCE
    validAfter: int = Field(ge=0)
    validBefore: int = Field(ge=0)


class Settlement(SignedContent):
    """The hub's signed statement that it moved the authorized amount (``transaction`` is the
    ledger entry)."""

    type: Literal["anet.settlement/v1"]
    hub: Aid
    network: _Word
    payer: Aid
    payee: Aid
    asset: _Word
    amount: _ATOMIC
    task: _Word
    nonce: _NONCE
    transaction: _Word
    settledAt: int = Field(ge=0)


class BalanceRequest(SignedContent):
    type: Literal["anet.balance-request/v1"]
    hub: Aid
    at: int = Field(ge=0)


class VoidRequest(SignedContent):
    """The payer's order to its hub: the authorizations ``nonces`` it signed for ``task`` must
    never settle. The hub keeps the decision with its ledger: each nonce is either settled
    already (the void loses, and the hub answers the settlement) or void from now on."""

    type: Literal["anet.payment-void/v1"]
    hub: Aid
    task: _Word
    nonces: list[_NONCE] = Field(min_length=1, max_length=MAX_VOIDED_NONCES)
    at: int = Field(ge=0)


def sign_authorization(identity: Identity, *, payee: str, network: str, asset: str, amount: int,
                       task: str, valid_for_s: int, now: int | None = None,
                       nonce: str | None = None) -> dict[str, Any]:
    """A fresh authorization signed by ``identity`` (the payer), valid from now for
    ``valid_for_s`` seconds (at most :data:`MAX_VALIDITY_S`)."""
    now = int(time.time()) if now is None else now
    return sign_document(identity, {
        "type": AUTHORIZATION_TYPE, "payer": identity.aid, "payee": payee, "network": network,
        "asset": asset, "amount": str(amount), "task": task,
        "nonce": nonce or secrets.token_hex(32),
        "validAfter": now, "validBefore": now + min(valid_for_s, MAX_VALIDITY_S)})


def verify_authorization(doc: object, payer: VerifiedHistory, *,
                         now: int | None = None) -> PaymentAuthorization:
    """The authorization when ``payer`` signed it, it is well-formed and valid at ``now``.

    Whether it matches what was asked for (payee, task, amount, asset, network) is the caller's
    check against the requirements; whether its nonce was used is the ledger's.
    """
    authorization = _verified(PaymentAuthorization, doc, payer, what="authorization")
    now = int(time.time()) if now is None else now
    if authorization.validBefore - authorization.validAfter > MAX_VALIDITY_S:
        raise PaymentError("authorization-window-too-long",
                           f"the authorization is valid for "
                           f"{authorization.validBefore - authorization.validAfter} s; at most "
                           f"{MAX_VALIDITY_S} s is accepted")
    if now < authorization.validAfter - CLOCK_SKEW_S:
        raise PaymentError("authorization-not-yet-valid",
                           f"the authorization is valid from {authorization.validAfter}, and it "
                           f"is {now}; check the payer's clock")
    if now >= authorization.validBefore:
        raise PaymentError("authorization-expired",
                           f"the authorization expired at {authorization.validBefore} (now "
                           f"{now}); the payer signs a new one")
    asset_decimals(authorization.asset)
    rail_hub(authorization.network)
    return authorization


def sign_settlement(hub: Identity, authorization: PaymentAuthorization, *, transaction: str,
                    now: int | None = None) -> dict[str, Any]:
    return sign_document(hub, {
        "type": SETTLEMENT_TYPE, "hub": hub.aid, "network": authorization.network,
        "payer": authorization.payer, "payee": authorization.payee,
        "asset": authorization.asset, "amount": authorization.amount,
        "task": authorization.task, "nonce": authorization.nonce, "transaction": transaction,
        "settledAt": int(time.time()) if now is None else now})


def verify_settlement(doc: object, hub: VerifiedHistory) -> Settlement:
    """The settlement when the hub ``hub`` signed it and it is well-formed."""
    return _verified(Settlement, doc, hub, what="settlement")


def sign_balance_request(identity: Identity, *, hub_aid: str,
                         now: int | None = None) -> dict[str, Any]:
    return sign_document(identity, {"type": BALANCE_REQUEST_TYPE, "hub": hub_aid,
                                    "at": int(time.time()) if now is None else now})


def verify_balance_request(doc: object, requester: VerifiedHistory, *, hub_aid: str,
                           now: int | None = None) -> BalanceRequest:
    """The request when ``requester`` signed it for this hub within :data:`CLOCK_SKEW_S`."""
    request: BalanceRequest = _verified(BalanceRequest, doc, requester, what="balance-request")
    return _fresh(request, "balance-request", hub_aid=hub_aid, now=now)


def sign_void_request(identity: Identity, *, hub_aid: str, task: str, nonces: list[str],
                      now: int | None = None) -> dict[str, Any]:
    return sign_document(identity, {"type": VOID_REQUEST_TYPE, "hub": hub_aid, "task": task,
                                    "nonces": list(nonces),
                                    "at": int(time.time()) if now is None else now})


def verify_void_request(doc: object, payer: VerifiedHistory, *, hub_aid: str,
                        now: int | None = None) -> VoidRequest:
    """The request when ``payer`` signed it for this hub within :data:`CLOCK_SKEW_S`."""
    request: VoidRequest = _verified(VoidRequest, doc, payer, what="void-request")
    return _fresh(request, "void-request", hub_aid=hub_aid, now=now)


Request = TypeVar("Request", BalanceRequest, VoidRequest)


def _fresh(request: Request, what: str, *, hub_aid: str, now: int | None) -> Request:
    """``request`` when it is for this hub and signed within :data:`CLOCK_SKEW_S` of ``now``;
    else :class:`PaymentError` ``<what>-stale``."""
    now = int(time.time()) if now is None else now
    if request.hub != hub_aid or abs(now - request.at) > CLOCK_SKEW_S:
        raise PaymentError(f"{what}-stale",
                           f"the {what.replace('-', ' ')} is for hub {request.hub} at "
                           f"{request.at}; this hub is {hub_aid} and it is {now}: sign a "
                           "fresh one")
    return request


def _verified(model: type[SignedContent], doc: object, history: VerifiedHistory, *,
              what: str) -> Any:
    try:
        return checked_content(model, doc, history, what=what, current_key=False)
    except DirectoryDocError as error:
        raise PaymentError(error.reason, error.message) from None
