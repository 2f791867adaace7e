"""The node's client of a hub rail (anet_x402.rail) against a real hub in this event loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator

import aiohttp
import pytest
from aiohttp import web
from x402.schemas import PaymentPayload, PaymentRequirements

from anet_core.identity import Identity
from anet_core.protocol.amounts import rail_network
from anet_hub import admin
from anet_x402.rail import RailClient, RailError, rail_url
from tests.support.hubs import HubClients, RunningHub, hub, hub_factory, nodes  # noqa: F401
from tests.support.payments import assert_ledger_conserved_async, pay, quote
from tests.support.processes import free_port

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
async def rail(hub: RunningHub, nodes: HubClients) -> AsyncIterator[RailClient]:  # noqa: F811
    await nodes.connect("payer", hub)
    await nodes.connect("payee", hub)
    await asyncio.to_thread(admin.credit, hub.config.data_dir, nodes.identity("payer").aid,
                            "0.50", "USD")
    async with RailClient(hub.url) as client:
        yield client
    await assert_ledger_conserved_async(hub.config.data_dir)


def _payment(hub: RunningHub, payer: Identity, payee: Identity,  # noqa: F811
             amount: int) -> tuple[PaymentPayload, PaymentRequirements]:
    requirements = quote(hub_aid=hub.state.identity.aid, payee=payee.aid, task="t-1",
                         amount=amount, hub_url=hub.http)
    body = pay(payer, requirements)
    return PaymentPayload.model_validate(body["paymentPayload"]), requirements


@pytest.mark.parametrize(("url", "expected"), [
    ("ws://127.0.0.1:8765", "http://127.0.0.1:8765"), ("wss://hub.example/v1/ws",
                                                       "https://hub.example"),
    ("http://[::1]:9/", "http://[::1]:9"), ("https://hub.example:443", "https://hub.example:443")])
def test_the_rail_is_at_the_hubs_http_address(url: str, expected: str) -> None:
    assert rail_url(url) == expected


def test_a_url_that_is_no_hub_is_named() -> None:
    with pytest.raises(RailError, match="ftp://x"):
        rail_url("ftp://x")


async def test_verify_settle_and_balance_with_x402_models(
        rail: RailClient, hub: RunningHub, nodes: HubClients) -> None:  # noqa: F811
    payer, payee = nodes.identity("payer"), nodes.identity("payee")
    supported = await rail.supported()
    assert supported.kinds[0].network == rail_network(hub.state.identity.aid)
    assert await rail.hub_aid() == hub.state.identity.aid
    payload, requirements = _payment(hub, payer, payee, 20)
    assert (await rail.verify(payload, requirements)).is_valid
    settled = await rail.settle(payload, requirements)
    assert settled.success and settled.amount == "20"
    again = await rail.settle(payload, requirements)  # a payee that lost the first answer
    assert again.error_reason == "nonce_already_used" and again.extra == settled.extra
    assert (await rail.balance(payer)).balances == {"USD": "0.30"}
    found = await rail.balance(payee, hub_aid=hub.state.identity.aid)
    assert (found.aid, found.hub, found.url, found.balances) == (
        payee.aid, hub.state.identity.aid, hub.http, {"USD": "0.20"})
    refused = await rail.settle(*_payment(hub, payer, payee, 31))
    assert refused.error_reason == "insufficient_funds" and "0.30" in (refused.error_message or "")


async def test_an_agent_the_hub_does_not_know_has_no_balance(rail: RailClient,
                                                             tmp_path) -> None:
    stranger = Identity.create(tmp_path / "stranger")
    with pytest.raises(RailError) as refused:
        await rail.balance(stranger)
    assert refused.value.reason == "unknown-agent" and stranger.aid in refused.value.message


async def test_an_unreachable_hub_is_an_error_naming_its_url(tmp_path) -> None:
    port = free_port()
    identity = Identity.create(tmp_path / "me")
    async with RailClient(f"ws://127.0.0.1:{port}", timeout_s=5) as client:
        for call in (client.supported(), client.balance(identity, hub_aid="h" * 32)):
            with pytest.raises(RailError) as unreachable:
                await call
            assert unreachable.value.reason == "rail-unreachable"
            assert f"http://127.0.0.1:{port}" in unreachable.value.message


async def test_a_server_that_is_no_rail_is_an_error_not_a_crash() -> None:
    async def page(request: web.Request) -> web.Response:
        return web.Response(text="<html>no rail here</html>", content_type="text/html")

    async def facilitator(request: web.Request) -> web.Response:
        return web.json_response({"kinds": [{"x402Version": 2, "scheme": "exact",
                                             "network": "eip155:8453"}]})

    app = web.Application()
    app.router.add_get("/x402/supported", facilitator)
    app.router.add_post("/x402/verify", page)
    runner = web.AppRunner(app)
    await runner.setup()
    port = free_port()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    try:
        async with aiohttp.ClientSession() as session:
            client = RailClient(f"http://127.0.0.1:{port}", session=session)
            with pytest.raises(RailError) as chain:
                await client.hub_aid()
            assert chain.value.reason == "rail-not-a-hub" and "eip155:8453" in str(chain.value)
            requirements = quote(hub_aid="h" * 32, payee="p" * 32, task="t", amount=1)
            payload = PaymentPayload(accepted=requirements, payload={})
            with pytest.raises(RailError) as html:
                await client.verify(payload, requirements)
            assert html.value.reason == "rail-bad-answer" and "no rail here" in str(html.value)
            assert not session.closed  # a session given is the caller's to close
    finally:
        await runner.cleanup()
