"""The node as its clients' signing service (docs/payments.md, "Paying for skills"), through
alice's local A2A endpoint with the official a2a-sdk client, a real hub (its rail) and bob's
node quoting and settling there: the tiers, the five reasons, `anet pay`, idempotency."""

from __future__ import annotations

import asyncio
import copy
from pathlib import Path

import httpx
import pytest
from a2a.types import TaskState

from anet_core.evidence import verify
from tests.support.payments import assert_ledger_conserved
from tests.support.waiting import eventually
from tests.x402.paying import (
    ACCEPT,
    PAYLOAD,
    REQUIRED,
    STATUS,
    X402,
    Chain,
    charging,
    metadata_of,
    paying_chain,
    sdk_client,
    send,
    status_metadata,
    user,
)

pytestmark = pytest.mark.timeout(120)

COMPLETED = TaskState.TASK_STATE_COMPLETED
WAITING = TaskState.TASK_STATE_INPUT_REQUIRED


@pytest.fixture
async def chain(tmp_path: Path):
    async with paying_chain(tmp_path) as running:
        await running.credit("5.00")
        yield running
    assert_ledger_conserved(tmp_path / "hub")


def transfers(chain: Chain) -> list[tuple[str, str, int]]:
    from tests.support.payments import ledger_totals
    return [(entry.payer, entry.payee, entry.amount)
            for entry in ledger_totals(chain.hub.data).transfers]


async def quoted(chain: Chain, text: str, *, extension: bool = True):
    async with sdk_client(chain, extension=extension) as client:
        task = await send(client, user(text))
    return task


@pytest.mark.parametrize("streaming", [False, True])
async def test_within_the_automatic_tier_the_node_pays_by_itself(chain: Chain,
                                                                 streaming: bool) -> None:
    # A client that knows nothing of payments: its send ends with the work done, its stream
    # never stops at the quote.
    async with sdk_client(chain, extension=False, streaming=streaming) as client:
        task = await send(client, user("price=0.05 summarize"))
    assert task.status.state == COMPLETED, task
    assert [part.text for part in task.artifacts[0].parts] == ["paid work: price=0.05 summarize"]
    assert transfers(chain) == [(chain.alice.aid, chain.bob.aid, 5)]
    assert [row["tier"] for row in chain.authorizations()] == ["auto"]
    await eventually(lambda: "payment.authorize" in chain.evidence_kinds(), "the record")
    report = verify(chain.alice.paths.root / "evidence" / "chain.jsonl",
                    chain.alice.identity.verified_history)
    assert report.ok, report
    payment = chain.agent.answers[0]["metadata"]
    assert payment[STATUS] == "payment-submitted"
    assert payment[PAYLOAD]["x402Version"] == 2
    assert payment[PAYLOAD]["payload"]["authorization"]["payer"] == chain.alice.aid


async def test_within_the_agent_tier_the_client_submits_and_the_node_signs(
        chain: Chain) -> None:
    async with sdk_client(chain, extension=True) as client:
        task = await send(client, user("price=0.50 translate"))
        assert task.status.state == WAITING
        assert "anet.reason" not in metadata_of(task)
        quote = status_metadata(task)[REQUIRED]
        assert status_metadata(task)[STATUS] == "payment-required"
        paid = await send(client, user("paying", task_id=task.id, context_id=task.context_id,
                                       metadata={STATUS: "payment-submitted",
                                                 ACCEPT: quote["accepts"][0]}))
        if paid.status.state != COMPLETED:
            paid = await eventually(lambda: _state(chain, task.id) == COMPLETED and paid)
    assert transfers(chain) == [(chain.alice.aid, chain.bob.aid, 50)]
    assert [row["tier"] for row in chain.authorizations()] == ["agent"]
    # The client's own message went to bob, with the node's signed payment in it, for the
    # quote's own option (the SDK's copy has 600.0 for 600: equal, not the same bytes).
    assert chain.agent.answers[0]["parts"] == [{"text": "paying"}]
    accepted = chain.agent.answers[0]["metadata"][PAYLOAD]["accepted"]
    assert type(accepted["maxTimeoutSeconds"]) is int


def _state(chain: Chain, task_id: str) -> TaskState:
    return TaskState.Value(chain.alice.tasks.get(None, task_id)["status"]["state"])


async def submit(chain: Chain, task, **metadata) -> object:
    async with sdk_client(chain, extension=True) as client:
        return await send(client, user("paying", task_id=task.id, context_id=task.context_id,
                                       metadata={STATUS: "payment-submitted", **metadata}))


def assert_refused(task, reason: str) -> None:
    assert task.status.state == WAITING, task
    assert metadata_of(task)["anet.reason"] == reason
    shown = status_metadata(task)
    assert shown[STATUS] == "payment-failed" and shown[REQUIRED]["accepts"]  # the quote remains


async def test_a_client_payload_is_refused_and_nothing_is_sent(chain: Chain) -> None:
    task = await quoted(chain, "price=0.50 a")
    refused = await submit(chain, task, **{PAYLOAD: {"x402Version": 2, "payload": {}}})
    assert_refused(refused, "client_payload_unsupported")
    assert chain.agent.answers == [] and chain.authorizations() == []
    assert "payment.refuse" in chain.evidence_kinds()


async def test_an_option_not_in_the_quote_is_refused(chain: Chain) -> None:
    task = await quoted(chain, "price=0.50 b")
    changed = copy.deepcopy(status_metadata(task)[REQUIRED]["accepts"][0])
    changed["amount"] = "1"
    refused = await submit(chain, task, **{ACCEPT: changed})
    assert_refused(refused, "option_not_offered")
    two = await quoted(chain, "price=0.50 rails=2 b")
    unnamed = await submit(chain, two)  # two options and none named
    assert_refused(unnamed, "option_not_offered")
    assert chain.agent.answers == [] and chain.authorizations() == []


async def test_a_rail_without_credit_is_refused(chain: Chain) -> None:
    task = await quoted(chain, "price=0.50 rails=2 c")
    foreign = status_metadata(task)[REQUIRED]["accepts"][1]
    refused = await submit(chain, task, **{ACCEPT: foreign})
    assert_refused(refused, "rail_not_payable")
    assert chain.agent.answers == [] and chain.authorizations() == []


async def test_above_the_agent_tier_the_operator_pays_with_anet_pay(chain: Chain) -> None:
    task = await quoted(chain, "price=2.00 e")
    assert task.status.state == WAITING
    assert metadata_of(task)["anet.reason"] == "needs_operator_approval"
    assert status_metadata(task)[STATUS] == "payment-required"
    asked = await asyncio.to_thread(chain.anet, "pay", task.id, check=False)
    assert asked.returncode != 0 and "--yes" in asked.stderr  # no terminal to ask on
    assert "2.00 USD" in asked.stdout
    wrong = await asyncio.to_thread(chain.anet, "pay", task.id, "--option", "3", "--yes",
                                    check=False)
    assert wrong.returncode != 0 and "no option 3" in wrong.stderr
    assert chain.authorizations() == []
    paid = await asyncio.to_thread(chain.anet, "pay", task.id, "--yes")
    assert "Paid 2.00 USD" in paid.stdout
    await eventually(lambda: _state(chain, task.id) == COMPLETED)
    assert transfers(chain) == [(chain.alice.aid, chain.bob.aid, 200)]
    assert [row["tier"] for row in chain.authorizations()] == ["operator"]
    again = await asyncio.to_thread(chain.anet, "pay", task.id, "--yes", check=False)
    assert again.returncode != 0 and "waits for no payment" in again.stderr
    assert chain.evidence_kinds().count("payment.authorize") == 1


async def test_a_client_without_the_extension_waits_for_the_operator(chain: Chain) -> None:
    task = await quoted(chain, "price=0.50 f", extension=False)
    assert task.status.state == WAITING
    assert metadata_of(task)["anet.reason"] == "payment_extension_not_activated"
    assert chain.authorizations() == []


async def test_a_repeated_payment_message_pays_once(chain: Chain) -> None:
    task = await quoted(chain, "price=0.50 g")
    message = user("paying", task_id=task.id, context_id=task.context_id,
                   metadata={STATUS: "payment-submitted"})
    async with sdk_client(chain, extension=True) as client:
        first = await send(client, message)
        again = await send(client, message)
    assert again.id == first.id == task.id
    await eventually(lambda: _state(chain, task.id) == COMPLETED)
    assert len(chain.authorizations()) == 1 and len(chain.agent.answers) == 1
    assert transfers(chain) == [(chain.alice.aid, chain.bob.aid, 50)]


async def test_two_concurrent_payment_messages_pay_once(chain: Chain) -> None:
    task = await quoted(chain, "price=0.50 h")

    async def pay_once():
        async with sdk_client(chain, extension=True) as client:
            return await send(client, user("paying", task_id=task.id,
                                           context_id=task.context_id,
                                           metadata={STATUS: "payment-submitted"}))

    results = await asyncio.gather(pay_once(), pay_once(), return_exceptions=True)
    assert any(not isinstance(result, BaseException) for result in results), results
    await eventually(lambda: _state(chain, task.id) == COMPLETED)
    assert len(chain.authorizations()) == 1 and len(chain.agent.answers) == 1
    assert transfers(chain) == [(chain.alice.aid, chain.bob.aid, 50)]


async def declared(chain: Chain) -> list[str]:
    async with httpx.AsyncClient(headers=chain.headers(extension=False)) as http:
        card = (await http.get(chain.agent_url())).json()
    return [extension["uri"] for extension in card["capabilities"].get("extensions", [])]


async def test_the_proxy_card_declares_a2a_x402_only_while_the_node_can_pay(
        tmp_path: Path) -> None:
    async with paying_chain(tmp_path) as chain:
        assert X402 not in await declared(chain)  # no credit at the rail yet
        await chain.credit("1.00")
        assert X402 in await declared(chain)
        # Activated by the v0.2 URI in the older header spelling too; the answer says so.
        v02 = "https://github.com/google-agentic-commerce/a2a-x402/blob/main/spec/v0.2"
        async with httpx.AsyncClient(headers=chain.headers(extension=False)) as http:
            answer = await http.post(f"{chain.agent_url()}/jsonrpc", headers={
                "X-A2A-Extensions": v02}, json={
                "jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
                    "message": {"role": "ROLE_USER", "messageId": "m-v02",
                                "parts": [{"text": "price=0.50 v02"}]}}}, timeout=30)
        assert answer.headers["X-A2A-Extensions"] == v02
        waiting = answer.json()["result"]["task"]  # answered once the node decided
        assert waiting["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert "anet.reason" not in waiting["metadata"]  # the client may submit: it activated
        await charging(chain.bob, chain.agent, charges=False)  # an agent that charges nothing
        chain.alice.hub.forget_peer(chain.bob.aid)
        assert X402 not in await declared(chain)
    async with paying_chain(tmp_path / "untiered", tiers={}) as chain:
        await chain.credit("1.00")
        assert X402 not in await declared(chain)  # no tier: the node pays nothing itself
