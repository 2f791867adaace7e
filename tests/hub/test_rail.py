"""The hub as a payment rail: its x402 facilitator interface over HTTP on a real hub in this event
loop, real nodes registered at it, the real ledger in hub.db; conservation checked after each."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from x402.schemas import SettleResponse, SupportedResponse, VerifyResponse

from anet_core.identity import Identity, verify_history
from anet_core.protocol.amounts import rail_network
from anet_core.protocol.payments import (
    FACILITATOR_PATH,
    sign_authorization,
    sign_balance_request,
    sign_void_request,
    verify_settlement,
)
from anet_hub import admin
from anet_hub.deployment import Deployment
from tests.hub.servers import PostgresServer, postgres  # noqa: F401 - the fixture
from tests.support.hubs import HubClients, RunningHub
from tests.support.payments import (
    assert_ledger_conserved_async,
    body,
    ledger_totals_async,
    pay,
    quote,
)

pytestmark = pytest.mark.timeout(60)


@dataclass
class Rail:
    """A running hub with a registered payer (credited 1.00 USD) and payee."""

    hub: RunningHub
    session: aiohttp.ClientSession
    payer: Identity
    payee: Identity

    @property
    def data(self) -> Path:
        return self.hub.config.data_dir

    def quote(self, amount: int = 5, *, task: str = "task-1", **changes: Any) -> Any:
        requirements = quote(hub_aid=self.hub.state.identity.aid, payee=self.payee.aid,
                             task=task, amount=amount, hub_url=self.hub.http)
        return requirements.model_copy(update=changes)

    async def post(self, verb: str, payload: object) -> tuple[int, dict[str, Any]]:
        async with self.session.post(f"{self.hub.http}{FACILITATOR_PATH}/{verb}",
                                     json=payload) as response:
            return response.status, await response.json()

    async def verify(self, payload: object) -> VerifyResponse:
        status, answer = await self.post("verify", payload)
        assert status == 200, answer
        return VerifyResponse.model_validate(answer)

    async def settle(self, payload: object) -> SettleResponse:
        status, answer = await self.post("settle", payload)
        assert status == 200, answer
        return SettleResponse.model_validate(answer)

    async def balances(self, *identities: Identity) -> tuple[int, ...]:
        totals = await ledger_totals_async(self.data)
        return tuple(totals.balance(identity.aid) for identity in identities)


@pytest.fixture(params=["sqlite", "postgres"])
async def rail(request: pytest.FixtureRequest, hub_factory: Callable[..., Awaitable[RunningHub]],
               nodes: HubClients, tmp_path: Path) -> AsyncIterator[Rail]:
    if request.param == "sqlite":
        hub = await hub_factory()
    else:
        server: PostgresServer = request.getfixturevalue("postgres")
        deployment = Deployment(postgres=server.create_database(f"rail_{uuid.uuid4().hex[:12]}"))
        deployment.write(tmp_path / "hub0")  # where `anet hub credit` finds the database
        hub = await hub_factory(deployment=deployment)
    await nodes.connect("payer", hub)
    await nodes.connect("payee", hub)
    await asyncio.to_thread(admin.credit, hub.config.data_dir, nodes.identity("payer").aid,
                            "1.00", "USD")
    async with aiohttp.ClientSession() as session:
        yield Rail(hub, session, nodes.identity("payer"), nodes.identity("payee"))
    await assert_ledger_conserved_async(hub.config.data_dir)


async def test_credit_verify_settle_moves_exactly_the_amount(rail: Rail) -> None:
    requirements = rail.quote(5)
    payment = pay(rail.payer, requirements)
    verified = await rail.verify(payment)
    assert verified.is_valid and verified.payer == rail.payer.aid, verified
    assert await rail.balances(rail.payer, rail.payee) == (100, 0)  # verify moves nothing

    settled = await rail.settle(payment)
    assert settled.success, settled
    assert (settled.payer, settled.amount, settled.network) == (
        rail.payer.aid, "5", rail_network(rail.hub.state.identity.aid))
    assert await rail.balances(rail.payer, rail.payee) == (95, 5)

    # The receipt verifies against the hub's key history, as a payee checks it.
    async with rail.session.get(f"{rail.hub.http}/v1/hub") as response:
        hub_info = await response.json()
    hub_history = verify_history(hub_info["history"], expected_aid=hub_info["aid"])
    assert settled.extra is not None
    receipt = verify_settlement(settled.extra["settlement"], hub_history)
    authorization = payment["paymentPayload"]["payload"]["authorization"]
    assert (receipt.payer, receipt.payee, receipt.amount, receipt.asset, receipt.task,
            receipt.nonce, receipt.transaction) == (
        rail.payer.aid, rail.payee.aid, "5", "USD", "task-1", authorization["nonce"],
        settled.transaction)
    transfer, = (await ledger_totals_async(rail.data)).transfers
    assert transfer.transaction == settled.transaction
    assert transfer.settlement == settled.extra["settlement"]
    assert transfer.authorization == authorization


async def test_a_replayed_authorization_moves_nothing_and_returns_the_original(rail: Rail) -> None:
    payment = pay(rail.payer, rail.quote(7))
    first = await rail.settle(payment)
    assert first.success
    again = await rail.settle(payment)
    assert (again.success, again.error_reason) == (False, "nonce_already_used")
    nonce = payment["paymentPayload"]["payload"]["authorization"]["nonce"]
    assert nonce in (again.error_message or "")
    assert again.extra == first.extra and again.transaction == first.transaction
    verified = await rail.verify(payment)
    assert (verified.is_valid, verified.invalid_reason) == (False, "nonce_already_used")
    assert await rail.balances(rail.payer, rail.payee) == (93, 7)


async def test_a_replay_after_expiry_still_recovers_the_settlement(rail: Rail) -> None:
    requirements = rail.quote(3)
    now = int(time.time())
    payment = pay(rail.payer, requirements, now=now - 100, valid_for_s=200)
    first = await rail.settle(payment)
    assert first.success, first
    expired = pay(rail.payer, requirements, now=now - 1000, valid_for_s=200,
                  nonce=payment["paymentPayload"]["payload"]["authorization"]["nonce"])
    again = await rail.settle(expired)
    assert again.error_reason == "nonce_already_used" and again.extra == first.extra
    assert await rail.balances(rail.payer) == (97,)


async def test_concurrent_settles_of_one_authorization_move_once(rail: Rail) -> None:
    payment = pay(rail.payer, rail.quote(10))
    answers = await asyncio.gather(*(rail.settle(payment) for _ in range(6)))
    succeeded = [answer for answer in answers if answer.success]
    assert len(succeeded) == 1, answers
    assert {answer.error_reason for answer in answers if not answer.success} == \
        {"nonce_already_used"}
    assert {answer.transaction for answer in answers} == {succeeded[0].transaction}
    assert await rail.balances(rail.payer, rail.payee) == (90, 10)


async def test_the_older_payload_generation_settles_too(rail: Rail) -> None:
    payment = pay(rail.payer, rail.quote(4), version=1)
    assert (await rail.verify(payment)).is_valid
    settled = await rail.settle(payment)
    assert settled.success, settled
    assert await rail.balances(rail.payee) == (4,)


Breaker = Callable[[Rail], Awaitable[tuple[dict[str, Any], str]]]


async def _expired(rail: Rail) -> tuple[dict[str, Any], str]:
    payment = pay(rail.payer, rail.quote(), now=int(time.time()) - 7200, valid_for_s=600)
    return payment, str(payment["paymentPayload"]["payload"]["authorization"]["validBefore"])


async def _insufficient(rail: Rail) -> tuple[dict[str, Any], str]:
    return pay(rail.payer, rail.quote(101)), "1.01"


async def _wrong_payee(rail: Rail) -> tuple[dict[str, Any], str]:
    return pay(rail.payer, rail.quote(), payee=rail.payer.aid), rail.payer.aid


async def _another_task(rail: Rail) -> tuple[dict[str, Any], str]:
    return pay(rail.payer, rail.quote(), task="task-2"), "task-2"


async def _wrong_amount(rail: Rail) -> tuple[dict[str, Any], str]:
    return pay(rail.payer, rail.quote(5), amount=4), "'4'"


async def _wrong_asset(rail: Rail) -> tuple[dict[str, Any], str]:
    return pay(rail.payer, rail.quote(5), asset="EUR"), "EUR"


async def _decimal_requirements(rail: Rail) -> tuple[dict[str, Any], str]:
    requirements = rail.quote(5).model_copy(update={"amount": "0.05"})
    authorization = sign_authorization(
        rail.payer, payee=rail.payee.aid, network=requirements.network, asset="USD", amount=5,
        task="task-1", valid_for_s=600)
    return body(authorization, requirements), "0.05"


async def _decimal_authorization(rail: Rail) -> tuple[dict[str, Any], str]:
    return pay(rail.payer, rail.quote(5), amount="0.05"), "0.05"


async def _another_network(rail: Rail) -> tuple[dict[str, Any], str]:
    other = rail_network(rail.payee.aid)
    return pay(rail.payer, rail.quote(network=other)), other


async def _unknown_payer(rail: Rail) -> tuple[dict[str, Any], str]:
    stranger = Identity.create(rail.data.parent / "stranger")
    return pay(stranger, rail.quote()), stranger.aid


async def _forged(rail: Rail) -> tuple[dict[str, Any], str]:
    payment = pay(rail.payer, rail.quote())
    payment["paymentPayload"]["payload"]["authorization"]["validBefore"] += 1
    return payment, "signature"


async def _other_scheme(rail: Rail) -> tuple[dict[str, Any], str]:
    return pay(rail.payer, rail.quote(scheme="upto")), "upto"


async def _changed_quote(rail: Rail) -> tuple[dict[str, Any], str]:
    payment = pay(rail.payer, rail.quote(5))
    payment["paymentRequirements"]["amount"] = "6"
    return payment, "'6'"


async def _no_authorization(rail: Rail) -> tuple[dict[str, Any], str]:
    payment = pay(rail.payer, rail.quote())
    payment["paymentPayload"]["payload"] = {"signature": "0xabc"}
    return payment, "authorization"


async def _request_version_3(rail: Rail) -> tuple[dict[str, Any], str]:
    return pay(rail.payer, rail.quote()) | {"x402Version": 3}, "x402Version 3"


async def _request_version_missing(rail: Rail) -> tuple[dict[str, Any], str]:
    payment = pay(rail.payer, rail.quote())
    del payment["x402Version"]
    return payment, "x402Version None"


@pytest.mark.parametrize(("breaker", "reason"), [
    (_request_version_3, "invalid_x402_version"),
    (_request_version_missing, "invalid_x402_version"),
    (_expired, "authorization_expired"), (_insufficient, "insufficient_funds"),
    (_wrong_payee, "recipient_mismatch"), (_another_task, "task_mismatch"),
    (_wrong_amount, "amount_mismatch"), (_wrong_asset, "asset_mismatch"),
    (_decimal_requirements, "too_many_decimals"), (_decimal_authorization, "too_many_decimals"),
    (_another_network, "invalid_network"), (_unknown_payer, "unknown_payer"),
    (_forged, "invalid_signature"), (_other_scheme, "unsupported_scheme"),
    (_changed_quote, "requirements_mismatch"), (_no_authorization, "invalid_payload"),
], ids=lambda value: getattr(value, "__name__", value).strip("_"))
async def test_a_refused_payment_names_the_value_and_moves_nothing(rail: Rail, breaker: Breaker,
                                                                   reason: str) -> None:
    payment, named = await breaker(rail)
    verified = await rail.verify(payment)
    assert (verified.is_valid, verified.invalid_reason) == (False, reason), verified
    assert named in (verified.invalid_message or ""), verified.invalid_message
    settled = await rail.settle(payment)
    assert (settled.success, settled.error_reason) == (False, reason), settled
    assert named in (settled.error_message or "")
    assert settled.transaction == "" and not settled.extra
    assert (await ledger_totals_async(rail.data)).transfers == []
    assert await rail.balances(rail.payer) == (100,)


async def test_a_body_that_is_not_json_is_a_clear_400(rail: Rail) -> None:
    for verb in ("verify", "settle"):
        async with rail.session.post(f"{rail.hub.http}{FACILITATOR_PATH}/{verb}",
                                     data=b"{not json") as response:
            assert response.status == 400
            answer = await response.json()
        reason = answer.get("invalidReason") or answer.get("errorReason")
        assert reason == "invalid_payload", answer


async def test_supported_names_the_scheme_network_and_assets(rail: Rail) -> None:
    async with rail.session.get(f"{rail.hub.http}{FACILITATOR_PATH}/supported") as response:
        supported = SupportedResponse.model_validate(await response.json())
    first = supported.kinds[0]
    assert (first.x402_version, first.scheme, first.network) == (
        2, "exact", rail_network(rail.hub.state.identity.aid))
    assert first.extra == {"assets": {"USD": 2, "EUR": 2, "USDC": 6}}


async def test_a_balance_is_told_only_to_its_owner(rail: Rail) -> None:
    hub_aid = rail.hub.state.identity.aid
    status, answer = await rail.post("balance", sign_balance_request(rail.payer, hub_aid=hub_aid))
    assert (status, answer) == (200, {"aid": rail.payer.aid, "hub": hub_aid,
                                      "balances": {"USD": "1.00"}})
    status, answer = await rail.post("balance", sign_balance_request(rail.payee, hub_aid=hub_aid))
    assert (status, answer["balances"]) == (200, {})
    forged = sign_balance_request(rail.payee, hub_aid=hub_aid) | {"signer": rail.payer.aid}
    status, answer = await rail.post("balance", forged)
    assert status == 403 and answer["error"].startswith("balance-request-"), answer
    stale = sign_balance_request(rail.payer, hub_aid=hub_aid, now=int(time.time()) - 3600)
    status, answer = await rail.post("balance", stale)
    assert (status, answer["error"]) == (403, "balance-request-stale"), answer
    stranger = Identity.create(rail.data.parent / "stranger")
    status, answer = await rail.post("balance", sign_balance_request(stranger, hub_aid=hub_aid))
    assert (status, answer["error"]) == (404, "unknown-agent") and stranger.aid in answer["message"]
    for nothing in ({}, [], "x"):
        status, answer = await rail.post("balance", nothing)
        assert (status, answer["error"]) == (400, "bad-request"), answer
        assert "no signer" in answer["message"]


def nonce_of(payment: dict[str, Any]) -> str:
    return str(payment["paymentPayload"]["payload"]["authorization"]["nonce"])


async def test_a_voided_authorization_never_settles(rail: Rail) -> None:
    """The payer withdraws its authorization (its task was canceled): verify and settle refuse
    it, whoever presents it, and nothing moves; voiding again answers the same."""
    hub_aid = rail.hub.state.identity.aid
    payment = pay(rail.payer, rail.quote(5, task="task-void"))
    request = sign_void_request(rail.payer, hub_aid=hub_aid, task="task-void",
                                nonces=[nonce_of(payment)])
    status, answer = await rail.post("void", request)
    assert status == 200, answer
    assert (answer["payer"], answer["hub"], answer["task"]) == (rail.payer.aid, hub_aid,
                                                                 "task-void")
    [decided] = answer["nonces"]
    assert (decided["nonce"], decided["outcome"]) == (nonce_of(payment), "voided")
    assert (await rail.post("void", request))[1]["nonces"] == [decided]
    verified = await rail.verify(payment)
    assert (verified.is_valid, verified.invalid_reason) == (False, "authorization_voided")
    settled = await rail.settle(payment)
    assert (settled.success, settled.error_reason) == (False, "authorization_voided")
    assert "task-void" in (settled.error_message or "") and not settled.extra
    assert (await ledger_totals_async(rail.data)).transfers == []
    assert await rail.balances(rail.payer, rail.payee) == (100, 0)


async def test_a_void_after_the_settlement_loses_and_answers_it(rail: Rail) -> None:
    hub_aid = rail.hub.state.identity.aid
    payment = pay(rail.payer, rail.quote(5, task="task-paid"))
    settled = await rail.settle(payment)
    assert settled.success
    status, answer = await rail.post("void", sign_void_request(
        rail.payer, hub_aid=hub_aid, task="task-paid", nonces=[nonce_of(payment)]))
    assert status == 200, answer
    [decided] = answer["nonces"]
    assert decided["outcome"] == "settled"
    assert decided["transaction"] == settled.transaction
    history = verify_history(rail.hub.state.identity.history, expected_aid=hub_aid)
    assert verify_settlement(decided["settlement"], history).task == "task-paid"
    assert await rail.balances(rail.payer, rail.payee) == (95, 5)


async def test_only_the_payer_voids_its_authorizations(rail: Rail) -> None:
    hub_aid = rail.hub.state.identity.aid
    payment = pay(rail.payer, rail.quote(5, task="task-kept"))
    nonces = [nonce_of(payment)]
    forged = sign_void_request(rail.payee, hub_aid=hub_aid, task="task-kept",
                               nonces=nonces) | {"signer": rail.payer.aid}
    status, answer = await rail.post("void", forged)
    assert status == 403 and answer["error"].startswith("void-request-"), answer
    stale = sign_void_request(rail.payer, hub_aid=hub_aid, task="task-kept", nonces=nonces,
                              now=int(time.time()) - 3600)
    assert (await rail.post("void", stale))[1]["error"] == "void-request-stale"
    # The payee's void of the same nonce is of its own (payee, nonce): the payer's stands.
    status, answer = await rail.post("void", sign_void_request(
        rail.payee, hub_aid=hub_aid, task="task-kept", nonces=nonces))
    assert status == 200, answer
    stranger = Identity.create(rail.data.parent / "stranger")
    status, answer = await rail.post("void", sign_void_request(
        stranger, hub_aid=hub_aid, task="task-kept", nonces=nonces))
    assert (status, answer["error"]) == (404, "unknown-agent"), answer
    async with rail.session.post(f"{rail.hub.http}{FACILITATOR_PATH}/void",
                                 data=b"{not json") as response:
        assert response.status == 400
        assert "void request" in (await response.json())["message"]
    assert (await rail.settle(payment)).success
    assert await rail.balances(rail.payer, rail.payee) == (95, 5)


@pytest.mark.parametrize("version", [2, 1])
async def test_the_official_x402_facilitator_client_verifies_and_settles(rail: Rail,
                                                                        version: int) -> None:
    """The ``x402`` package's own HTTP facilitator client against the hub's rail, its models
    unchanged, both payload generations: the hub is an x402 facilitator, not a look-alike."""
    from x402.http import FacilitatorConfig, HTTPFacilitatorClient
    from x402.schemas import parse_payment_payload, parse_payment_requirements

    payment = pay(rail.payer, rail.quote(5, task=f"task-v{version}"), version=version)
    payload = parse_payment_payload(payment["paymentPayload"])
    requirements = parse_payment_requirements(version, payment["paymentRequirements"])
    async with HTTPFacilitatorClient(
            FacilitatorConfig(url=f"{rail.hub.http}{FACILITATOR_PATH}")) as client:
        verified = await client.verify(payload, requirements)
        assert verified.is_valid, verified
        settled = await client.settle(payload, requirements)
        assert settled.success and settled.transaction.startswith("anet-tx-"), settled
        again = await client.settle(payload, requirements)
    assert (again.success, again.error_reason) == (False, "nonce_already_used")
    assert await rail.balances(rail.payer, rail.payee) == (95, 5)


async def test_a_ledger_is_told_only_to_its_agent_page_by_page(
        rail: Rail, monkeypatch: pytest.MonkeyPatch) -> None:
    from anet_hub import ledger

    monkeypatch.setattr(ledger, "LEDGER_PAGE", 2)
    hub_aid = rail.hub.state.identity.aid
    for task in ("t-1", "t-2", "t-3"):
        assert (await rail.settle(pay(rail.payer, rail.quote(5, task=task)))).success
    pages, after = [], 0
    while after is not None:
        status, answer = await rail.post(f"ledger?after={after}",
                                         sign_balance_request(rail.payee, hub_aid=hub_aid))
        assert status == 200 and answer["aid"] == rail.payee.aid, answer
        pages.append([(entry["kind"], entry["task"], entry["amount"])
                      for entry in answer["entries"]])
        after = answer["next"]
    assert pages == [[("transfer", "t-1", "0.05"), ("transfer", "t-2", "0.05")],
                     [("transfer", "t-3", "0.05")]]
    status, answer = await rail.post("ledger", sign_balance_request(rail.payer, hub_aid=hub_aid))
    assert [entry["kind"] for entry in answer["entries"]] == ["credit", "transfer"]
    forged = sign_balance_request(rail.payee, hub_aid=hub_aid) | {"signer": rail.payer.aid}
    assert (await rail.post("ledger", forged))[0] == 403
    status, answer = await rail.post("ledger?after=x", sign_balance_request(
        rail.payee, hub_aid=hub_aid))
    assert (status, answer["error"]) == (400, "bad-request") and "'x'" in answer["message"]
