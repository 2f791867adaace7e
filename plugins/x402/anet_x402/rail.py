"""The node's client of a hub rail: the x402 facilitator interface of a hub, and balances.

A hub serves its rail over HTTP on its own listener (docs/payments.md, "The hub as a payment
rail"): ``GET /x402/supported``, ``POST /x402/verify`` and ``POST /x402/settle`` as any x402
facilitator (https://github.com/coinbase/x402, specs "Facilitator"), and ``POST /x402/balance``
for a node's own credit. :class:`RailClient` speaks it with the ``x402`` package's models.

:class:`Facilitator` is what a provider settles with. A hub rail is one; a chain rail is
another implementation of the same three methods, in a module of its own, so adding one
changes nothing here.

Every failure to reach the rail is a :class:`RailError` naming the URL. A refusal of the
payment itself is not an error: it is the answer (``is_valid``/``success`` false, with the
reason). Settling the same payload again is safe: the rail moves it once and answers
``nonce_already_used`` with the original settlement in ``extra["settlement"]``.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol, TypeVar
from urllib.parse import urlsplit

import aiohttp
from pydantic import BaseModel, ValidationError

from anet_core.api import AnetError, HistoryError, Identity, ReasonError, verify_history
from anet_core.protocol.amounts import PaymentError, rail_hub
from anet_core.protocol.payments import (
    FACILITATOR_PATH,
    sign_balance_request,
    sign_void_request,
    verify_settlement,
)
from anet_x402.balance_cli import CREDIT_HINT

if TYPE_CHECKING:  # x402's models load at the first request (docs/performance.md, "Idle memory")
    from x402.schemas import (
        PaymentPayload,
        PaymentPayloadV1,
        PaymentRequirements,
        PaymentRequirementsV1,
        SettleResponse,
        SupportedResponse,
        VerifyResponse,
    )

    Payload = PaymentPayload | PaymentPayloadV1
    Requirements = PaymentRequirements | PaymentRequirementsV1

DEFAULT_TIMEOUT_S = 15.0
_SCHEMES = {"ws": "http", "wss": "https", "http": "http", "https": "https"}

Model = TypeVar("Model", bound=BaseModel)
T = TypeVar("T")

log = logging.getLogger(__name__)


class RailError(ReasonError):
    """The rail could not be asked, or answered what no rail answers. ``reason``:
    ``rail-unreachable``, ``rail-bad-answer``, ``rail-not-a-hub``, or the hub's own reason for
    a request it refused (``hub-storage-error``, ``unknown-agent``, ``balance-request-…``)."""


class Facilitator(Protocol):
    """An x402 facilitator as a provider uses it (hub rails and, later, chain rails)."""

    async def supported(self) -> SupportedResponse: ...

    async def verify(self, payload: Payload, requirements: Requirements) -> VerifyResponse:
        """Whether the payment would settle now; moves nothing."""

    async def settle(self, payload: Payload, requirements: Requirements) -> SettleResponse:
        """Move the payment once; again with the same payload moves nothing."""


@dataclass(frozen=True)
class Balances:
    """An AID's credit at one hub rail: asset → decimal string (assets never credited are
    absent)."""

    aid: str
    hub: str
    url: str
    balances: dict[str, str]


@dataclass(frozen=True)
class Decision:
    """What a hub rail's ledger holds for one authorization a payer voided: void from now on,
    or settled before the void (``transaction``, and the hub's signed ``settlement``)."""

    nonce: str
    settled: bool
    transaction: str = ""
    settlement: dict[str, Any] | None = None


def rail_url(hub_url: str) -> str:
    """The HTTP base URL of the hub a node reaches at ``hub_url`` (``ws://host:port`` →
    ``http://host:port``; ``wss`` → ``https``; a path is dropped: the rail is at the root)."""
    parts = urlsplit(hub_url.strip())
    scheme = _SCHEMES.get(parts.scheme.lower())
    if scheme is None or not parts.netloc:
        raise RailError("rail-bad-url", f"{hub_url!r} is not a hub URL (ws://, wss://, http:// "
                                        "or https://HOST:PORT)")
    return f"{scheme}://{parts.netloc}"


def facilitator_body(payload: Payload, requirements: Requirements) -> dict[str, Any]:
    """``{x402Version, paymentPayload, paymentRequirements}``, as verify and settle take it."""
    return {"x402Version": payload.x402_version,
            "paymentPayload": payload.model_dump(by_alias=True, exclude_none=True),
            "paymentRequirements": requirements.model_dump(by_alias=True, exclude_none=True)}


class RailClient:
    """The rail of the hub at ``url`` (its http(s) base URL, or its ws(s) URL)."""

    def __init__(self, url: str, *, session: aiohttp.ClientSession | None = None,
                 timeout_s: float = DEFAULT_TIMEOUT_S) -> None:
        self.url = rail_url(url)
        self._session = session
        self._owns_session = session is None
        self._timeout = aiohttp.ClientTimeout(total=timeout_s)

    async def __aenter__(self) -> RailClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.close()

    async def close(self) -> None:
        if self._owns_session and self._session is not None:
            await self._session.close()
        self._session = None

    # -- the facilitator interface ------------------------------------------------------------

    async def supported(self) -> SupportedResponse:
        from x402.schemas import SupportedResponse

        return self._parsed(SupportedResponse, *await self._request("GET", "supported"))

    async def verify(self, payload: Payload, requirements: Requirements) -> VerifyResponse:
        from x402.schemas import VerifyResponse

        status, answer = await self._request("POST", "verify",
                                             facilitator_body(payload, requirements))
        return self._parsed(VerifyResponse, status, answer, refusals=(400,))

    async def settle(self, payload: Payload, requirements: Requirements) -> SettleResponse:
        from x402.schemas import SettleResponse

        status, answer = await self._request("POST", "settle",
                                             facilitator_body(payload, requirements))
        return self._parsed(SettleResponse, status, answer, refusals=(400,))

    # -- balances -----------------------------------------------------------------------------

    async def hub_aid(self) -> str:
        """The AID of the hub whose rail this is, from the network it names."""
        networks = [kind.network for kind in (await self.supported()).kinds]
        try:
            return rail_hub(networks[0] if networks else "")
        except PaymentError:
            raise RailError("rail-not-a-hub", f"{self.url} is a facilitator, not a hub rail: it "
                                              f"settles {networks}") from None

    async def balance(self, identity: Identity, *, hub_aid: str | None = None) -> Balances:
        """``identity``'s credit at this rail, asked with a request it signs."""
        hub = hub_aid or await self.hub_aid()
        status, answer = await self._request("POST", "balance",
                                             sign_balance_request(identity, hub_aid=hub))
        balances = answer.get("balances") if isinstance(answer, dict) else None
        if status != 200 or not isinstance(balances, dict):
            raise self._refusal(status, answer)
        return Balances(aid=str(answer.get("aid")), hub=str(answer.get("hub")), url=self.url,
                        balances={str(asset): str(amount) for asset, amount in balances.items()})

    async def ledger(self, identity: Identity, *, hub_aid: str | None = None
                     ) -> list[dict[str, Any]]:
        """``identity``'s entries in this rail's ledger, oldest first: its credits and the
        transfers it paid or was paid (``anet hub ledger --json`` shapes), every page."""
        hub = hub_aid or await self.hub_aid()
        entries: list[dict[str, Any]] = []
        after: int | None = 0
        while after is not None:
            status, answer = await self._request(
                "POST", f"ledger?after={after}", sign_balance_request(identity, hub_aid=hub))
            page = answer.get("entries") if isinstance(answer, dict) else None
            if status != 200 or not isinstance(page, list):
                raise self._refusal(status, answer)
            entries += page
            after = answer.get("next") if isinstance(answer.get("next"), int) else None
        return entries

    async def void(self, identity: Identity, *, hub_aid: str, task: str,
                   nonces: list[str]) -> list[Decision]:
        """Withdraw ``identity``'s authorizations ``nonces`` for ``task``: the rail's decision
        on each (docs/payments.md, "Cancel and settlement")."""
        status, answer = await self._request("POST", "void", sign_void_request(
            identity, hub_aid=hub_aid, task=task, nonces=nonces))
        decided = answer.get("nonces") if isinstance(answer, dict) else None
        if status != 200 or not isinstance(decided, list):
            raise self._refusal(status, answer)
        try:
            decisions = [Decision(nonce=str(item["nonce"]),
                                  settled=item["outcome"] == "settled",
                                  transaction=str(item.get("transaction", "")),
                                  settlement=item.get("settlement")) for item in decided]
        except (TypeError, KeyError):
            raise RailError("rail-bad-answer", f"{self.url} answered a void with "
                                               f"{str(answer)[:200]}") from None
        if sorted(decision.nonce for decision in decisions) != sorted(set(nonces)):
            raise RailError("rail-bad-answer", f"{self.url} decided on other authorizations "
                                               f"than those voided: {str(answer)[:200]}")
        return decisions

    # -- HTTP ---------------------------------------------------------------------------------

    def _client(self) -> aiohttp.ClientSession:
        if self._session is None:
            self._session = aiohttp.ClientSession()
        return self._session

    async def _request(self, method: str, verb: str, body: Any = None) -> tuple[int, Any]:
        url = f"{self.url}{FACILITATOR_PATH}/{verb}"
        try:
            async with self._client().request(method, url, json=body,
                                              timeout=self._timeout) as response:
                raw = await response.read()
        except (aiohttp.ClientError, TimeoutError, OSError) as error:
            raise RailError("rail-unreachable", f"the hub rail at {self.url} did not answer "
                                                f"{method} {FACILITATOR_PATH}/{verb}: "
                                                f"{str(error) or type(error).__name__}") from None
        try:
            return response.status, json.loads(raw)
        except ValueError:
            raise RailError("rail-bad-answer", f"{url} answered {response.status} with something "
                                               f"that is not JSON: {raw[:120]!r}") from None

    def _parsed(self, model: type[Model], status: int, answer: Any, *,
                refusals: tuple[int, ...] = ()) -> Model:
        if status != 200 and status not in refusals:
            raise self._refusal(status, answer)
        try:
            return model.model_validate(answer)
        except ValidationError as error:
            first = error.errors()[0]
            raise RailError("rail-bad-answer", f"{self.url} answered a {model.__name__} that is "
                                               f"invalid at {'.'.join(map(str, first['loc']))}: "
                                               f"{first['msg']}") from None

    def _refusal(self, status: int, answer: Any) -> RailError:
        if isinstance(answer, dict) and isinstance(answer.get("error"), str):
            return RailError(answer["error"], f"the hub rail at {self.url} refused ({status}): "
                                              f"{answer.get('message', '')}")
        return RailError("rail-bad-answer", f"the hub rail at {self.url} answered {status}: "
                                            f"{str(answer)[:200]}")


async def again_while_unreachable(ask: Callable[[], Awaitable[T]], *, attempts: int,
                                  pause_s: float, what: str) -> T:
    """``ask()``, asked again while the rail does not answer (for a request that is safe to
    repeat: settling or voiding again answers the first outcome), ``attempts`` times with
    pauses of ``pause_s``, twice that, …; the last :class:`RailError` when none answered."""
    for attempt in range(1, attempts + 1):
        try:
            return await ask()
        except RailError as error:
            log.warning("event=rail-unanswered what=%r attempt=%d error=%r", what, attempt,
                        error.message)
            if attempt == attempts:
                raise
            await asyncio.sleep(pause_s * attempt)
    raise AssertionError("unreachable: attempts is at least 1")


def settlement_problem(hub_pin: Path, settlement: Any,
                       expected: dict[str, Any]) -> str | None:
    """Why ``settlement`` is not the home hub's (its key history pinned in ``hub_pin``)
    statement of the payment ``expected`` describes (its ``nonce``, ``payee``, ``task``, … as
    the settlement names them), or None when it is."""
    try:
        pinned = json.loads(hub_pin.read_text(encoding="utf-8"))
        history = verify_history(pinned["history"], expected_aid=pinned["hubAid"])
        checked = verify_settlement(settlement, history)
    except (OSError, ValueError, KeyError, TypeError, HistoryError, PaymentError) as error:
        return f"the hub's settlement does not verify: {error}"
    for key, value in expected.items():
        if getattr(checked, key) != value:
            return f"the hub's settlement has another {key}: {getattr(checked, key)!r}"
    return None


NOT_JOINED_HINT = "join a hub first: `anet join <hub URL>`"


async def home_balance(identity: Identity, hub_url: str | None) -> Balances:
    """``identity``'s credit at the rail of the hub at ``hub_url``; :class:`AnetError` when there
    is no hub or its rail cannot tell."""
    if not hub_url:
        raise AnetError("x402-not-joined", "this node has no home hub, so no rail holds its "
                                           "credit", hint=NOT_JOINED_HINT)
    try:
        async with RailClient(hub_url) as rail:
            return await rail.balance(identity)
    except RailError as error:
        hint = (f"the node registers at its hub when it runs (`anet up`); {CREDIT_HINT}"
                .format(aid=identity.aid) if error.reason == "unknown-agent"
                else "`anet status` shows the hub connection")
        raise AnetError(error.reason, error.message, hint=hint) from None
