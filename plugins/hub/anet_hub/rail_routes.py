"""The rail's HTTP interface on the hub's own listener (docs/payments.md)::

    GET  /x402/supported   x402 SupportedResponse: the scheme, this hub's network, the assets
    POST /x402/verify      {x402Version, paymentPayload, paymentRequirements} → VerifyResponse
    POST /x402/settle      the same body → SettleResponse (extra.settlement: signed by the hub)
    POST /x402/balance     a signed balance request → {"aid", "hub", "balances"}
    POST /x402/void        a signed void request → {"payer", "hub", "task", "nonces": [...]}
    POST /x402/ledger      a signed balance request (?after=seq) → {"aid", "hub", "entries",
                           "next"}: the node's own credits and transfers

A refusal of a payment is an answer (200, ``isValid``/``success`` false, with the reason); a
request that is not JSON is a 400 with the same shape. A storage that fails is a 503
``{"error", "message"}`` (the app's middleware), and nothing moved.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

from aiohttp import web

from anet_core.protocol.amounts import PaymentError
from anet_core.protocol.payments import FACILITATOR_PATH
from anet_hub import ledger as ledger_book
from anet_hub.http_errors import storage_errors

if TYPE_CHECKING:
    from x402.schemas import SettleResponse, SupportedResponse, VerifyResponse

    from anet_hub.app import HubState
    from anet_hub.rail import HubRail

log = logging.getLogger(__name__)

MAX_REQUEST_BYTES = 64 * 1024
"""A payment request is a few kilobytes; more is not one."""


def _x402(model: VerifyResponse | SettleResponse | SupportedResponse,
          status: int = 200) -> web.Response:
    return web.json_response(model.model_dump(by_alias=True, exclude_none=True), status=status)


async def _body(request: web.Request) -> tuple[bool, object]:
    """Whether the body is JSON (of a payment request's size), and what it is (the rail refuses
    anything but an object itself)."""
    raw = await request.content.read(MAX_REQUEST_BYTES + 1)
    if len(raw) > MAX_REQUEST_BYTES:
        return False, None
    try:
        return True, json.loads(raw)
    except ValueError:
        return False, None


def add_rail_routes(app: web.Application, state_key: web.AppKey[HubState]) -> None:
    def rail(request: web.Request) -> HubRail:
        # The rail and the x402 package's models load at the first payment request, not in an
        # idle hub: building those models costs 6.4 MiB (docs/performance.md, "Idle memory").
        from anet_hub.rail import HubRail

        hub = request.app[state_key]
        return HubRail(hub.identity, hub.storage)

    async def supported(request: web.Request) -> web.Response:
        return _x402(await rail(request).supported())

    async def verify(request: web.Request) -> web.Response:
        parsed, body = await _body(request)
        answer = await rail(request).verify(body)
        log.info("event=rail-verify valid=%s reason=%s payer=%s", answer.is_valid,
                 answer.invalid_reason or "-", answer.payer or "-")
        return _x402(answer, 200 if parsed else 400)

    async def settle(request: web.Request) -> web.Response:
        parsed, body = await _body(request)
        answer = await rail(request).settle(body)
        log.info("event=rail-settle success=%s reason=%s payer=%s transaction=%s amount=%s",
                 answer.success, answer.error_reason or "-", answer.payer or "-",
                 answer.transaction or "-", answer.amount or "-")
        return _x402(answer, 200 if parsed else 400)

    def signed(what: str,
               answer: Callable[[HubRail, object, web.Request], Awaitable[dict[str, Any]]]
               ) -> Callable[[web.Request], Awaitable[web.Response]]:
        """A route taking a request the node signed (``what``): the answer, or the refusal of
        the signature (403), of an AID the hub does not know (404) or of a body that is none
        (400)."""
        async def route(request: web.Request) -> web.Response:
            hub_rail = rail(request)
            parsed, body = await _body(request)
            if not parsed:
                return web.json_response({"error": "bad-request", "message": "the request body "
                                          f"is not JSON: send a signed {what}"}, status=400)
            try:
                return web.json_response(await answer(hub_rail, body, request))
            except PaymentError as error:
                status = {"unknown-agent": 404, "bad-request": 400}.get(error.reason, 403)
                return web.json_response({"error": error.reason, "message": error.message},
                                         status=status)

        return route

    async def balance(hub_rail: HubRail, body: object, _: web.Request) -> dict[str, Any]:
        aid, balances = await hub_rail.balance(body)
        return {"aid": aid, "hub": hub_rail.identity.aid, "balances": balances}

    async def ledger(hub_rail: HubRail, body: object, request: web.Request) -> dict[str, Any]:
        after = request.query.get("after", "0")
        if not after.isdigit():
            raise PaymentError("bad-request", f"after={after[:40]!r} is not a ledger seq: give "
                                              "the `next` of the previous answer")
        page = ledger_book.LEDGER_PAGE
        aid, entries = await hub_rail.ledger(body, after_seq=int(after), limit=page)
        return {"aid": aid, "hub": hub_rail.identity.aid,
                "entries": [entry.as_dict() for entry in entries],
                "next": entries[-1].seq if len(entries) == page else None}

    async def void(hub_rail: HubRail, body: object, _: web.Request) -> dict[str, Any]:
        payer, task, decided = await hub_rail.void(body)
        log.info("event=rail-void payer=%s task=%s outcomes=%s", payer, task,
                 ",".join(item["outcome"] for item in decided))
        return {"payer": payer, "hub": hub_rail.identity.aid, "task": task, "nonces": decided}

    app.router.add_get(f"{FACILITATOR_PATH}/supported", storage_errors(supported))
    app.router.add_post(f"{FACILITATOR_PATH}/verify", storage_errors(verify))
    app.router.add_post(f"{FACILITATOR_PATH}/settle", storage_errors(settle))
    app.router.add_post(f"{FACILITATOR_PATH}/balance",
                        storage_errors(signed("balance request", balance)))
    app.router.add_post(f"{FACILITATOR_PATH}/void", storage_errors(signed("void request", void)))
    app.router.add_post(f"{FACILITATOR_PATH}/ledger",
                        storage_errors(signed("balance request", ledger)))
