"""The node as its clients' signing service (docs/payments.md, "Paying for skills"), through
alice's local A2A endpoint with the official a2a-sdk client, a real hub (its rail) and bob's
module x402 quoting and settling there: the tiers, the five reasons, `anet pay`, idempotency."""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path

import httpx
import pytest
from a2a.types import TaskState
from a2a.utils.errors import InvalidParamsError

from anet_core.evidence import verify
from tests.support.nodes import running_node
from tests.support.payments import assert_ledger_conserved
from tests.support.waiting import eventually
from tests.x402.paying import (
    ACCEPT,
    PAYLOAD,
    REQUIRED,
    STATUS,
    X402,
    Chain,
    metadata_of,
    paying_chain,
    sdk_client,
    send,
    status_metadata,
    user,
)
from tests.x402.paying import SKILL as SKILL_KEY

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


async def quoted(chain: Chain, text: str, skill: str, *, extension: bool = True):
    async with sdk_client(chain, extension=extension) as client:
        task = await send(client, user(text, skill))
    return task


@pytest.mark.parametrize("streaming", [False, True])
async def test_within_the_automatic_tier_the_node_pays_by_itself(chain: Chain,
                                                                 streaming: bool) -> None:
    # A client that knows nothing of payments: its send ends with the work done, its stream
    # never stops at the quote.
    async with sdk_client(chain, extension=False, streaming=streaming) as client:
        task = await send(client, user("summarize", "work"))
    assert task.status.state == COMPLETED, task
    assert [part.text for part in task.artifacts[0].parts] == ["paid work: summarize"]
    assert transfers(chain) == [(chain.alice.aid, chain.bob.aid, 5)]
    assert [row["tier"] for row in chain.authorizations()] == ["auto"]
    await eventually(lambda: "payment.authorize" in chain.evidence_kinds(), "the record")
    report = verify(chain.alice.paths.root / "evidence" / "chain.jsonl",
                    chain.alice.identity.verified_history)
    assert report.ok, report
    [payment] = [message["metadata"] for message in chain.payments_at_bob(task.id)]
    assert payment[STATUS] == "payment-submitted"
    assert payment[PAYLOAD]["x402Version"] == 2
    assert payment[PAYLOAD]["payload"]["authorization"]["payer"] == chain.alice.aid
    assert status_metadata(task)["x402.payment.receipts"][0]["success"] is True
    assert chain.settled_at_bob() == [task.id]


async def test_within_the_agent_tier_the_client_submits_and_the_node_signs(
        chain: Chain) -> None:
    async with sdk_client(chain, extension=True) as client:
        task = await send(client, user("translate this", "translate"))
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
    [answer] = chain.payments_at_bob(task.id)
    assert answer["parts"] == [{"text": "paying"}]
    assert type(answer["metadata"][PAYLOAD]["accepted"]["maxTimeoutSeconds"]) is int
    assert [message["parts"] for message in chain.worker.served] == [
        [{"text": "translate this"}]]


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
    task = await quoted(chain, "a", "translate")
    refused = await submit(chain, task, **{PAYLOAD: {"x402Version": 2, "payload": {}}})
    assert_refused(refused, "client_payload_unsupported")
    assert chain.payments_at_bob(task.id) == [] and chain.authorizations() == []
    await eventually(lambda: "payment.refuse" in chain.evidence_kinds(), "the refusal")


async def test_a_client_payload_on_a_new_task_is_refused_and_nothing_is_sent(
        chain: Chain) -> None:
    # Nothing a client signed leaves this node, not even in the first message of a task: the
    # task is rejected here, bob never hears of it.
    payload = {STATUS: "payment-submitted", PAYLOAD: {"x402Version": 2, "payload": {}}}
    async with sdk_client(chain, extension=True) as client:
        message = user("signed by me", "translate", metadata=payload, context_id="ctx-signed")
        task = await send(client, message)
        again = await send(client, message)  # a repeat is the same rejected task
    assert task.status.state == TaskState.TASK_STATE_REJECTED, task
    assert again.id == task.id
    assert metadata_of(task)["anet.reason"] == "client_payload_unsupported"
    shown = status_metadata(task)
    assert shown[STATUS] == "payment-failed" and REQUIRED not in shown
    assert chain.bob.tasks.received(task.id) is None and chain.worker.served == []
    assert chain.authorizations() == []
    await eventually(lambda: "payment.refuse" in chain.evidence_kinds(), "the refusal")


async def test_an_option_not_in_the_quote_is_refused(chain: Chain) -> None:
    task = await quoted(chain, "b", "translate")
    changed = copy.deepcopy(status_metadata(task)[REQUIRED]["accepts"][0])
    changed["amount"] = "1"
    refused = await submit(chain, task, **{ACCEPT: changed})
    assert_refused(refused, "option_not_offered")
    two = await quoted(chain, "b", "abroad")
    assert len(status_metadata(two)[REQUIRED]["accepts"]) == 2
    unnamed = await submit(chain, two)  # two options and none named
    assert_refused(unnamed, "option_not_offered")
    assert chain.payments_at_bob(task.id) == chain.payments_at_bob(two.id) == []
    assert chain.authorizations() == []


async def test_a_rail_without_credit_is_refused(chain: Chain) -> None:
    task = await quoted(chain, "c", "abroad")
    home, foreign = status_metadata(task)[REQUIRED]["accepts"]
    assert home["extra"]["hubUrl"] != foreign["extra"]["hubUrl"]  # bob's second rail
    refused = await submit(chain, task, **{ACCEPT: foreign})
    assert_refused(refused, "rail_not_payable")
    assert chain.payments_at_bob(task.id) == [] and chain.authorizations() == []


async def test_above_the_agent_tier_with_too_little_credit_the_operator_decides(
        tmp_path: Path) -> None:
    """The limits come first: a payment above the agent's tier waits for the operator
    (needs_operator_approval), whatever the credit; the credit is the operator's concern."""
    async with paying_chain(tmp_path) as chain:
        await chain.credit("1.00")
        task = await quoted(chain, "d", "review")  # 2.00 USD: above agent_max, above the credit
        held = await submit(chain, task)
        assert held.status.state == WAITING
        assert metadata_of(held)["anet.reason"] == "needs_operator_approval"
        assert status_metadata(held)[STATUS] == "payment-required"
        assert chain.authorizations() == []
    assert_ledger_conserved(tmp_path / "hub")


async def test_above_the_agent_tier_the_operator_pays_with_anet_pay(chain: Chain) -> None:
    task = await quoted(chain, "e", "review")
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
    unasked = await asyncio.to_thread(chain.anet, "pay", task.id, "--json", check=False)
    assert unasked.returncode == 1 and json.loads(unasked.stdout)["error"] == "confirmation-needed"
    paid = await asyncio.to_thread(chain.anet, "pay", task.id, "--yes")
    # It waits for the outcome: the work done and the payment settled.
    assert "Paid 2.00 USD" in paid.stdout and "the task is completed." in paid.stdout, paid.stdout
    assert _state(chain, task.id) == COMPLETED
    assert transfers(chain) == [(chain.alice.aid, chain.bob.aid, 200)]
    assert [row["tier"] for row in chain.authorizations()] == ["operator"]
    again = await asyncio.to_thread(chain.anet, "pay", task.id, "--yes", check=False)
    assert again.returncode != 0 and "waits for no payment" in again.stderr
    as_json = await asyncio.to_thread(chain.anet, "pay", task.id, "--yes", "--json", check=False)
    assert as_json.returncode == 1 and json.loads(as_json.stdout)["error"] == "no-quote"
    await eventually(lambda: "payment.authorize" in chain.evidence_kinds(), "the record")
    assert chain.evidence_kinds().count("payment.authorize") == 1


async def test_a_client_without_the_extension_waits_for_the_operator(chain: Chain) -> None:
    task = await quoted(chain, "f", "translate", extension=False)
    assert task.status.state == WAITING
    assert metadata_of(task)["anet.reason"] == "payment_extension_not_activated"
    assert chain.authorizations() == []


async def test_a_repeated_payment_message_pays_once(chain: Chain) -> None:
    task = await quoted(chain, "g", "translate")
    message = user("paying", task_id=task.id, context_id=task.context_id,
                   metadata={STATUS: "payment-submitted"})
    async with sdk_client(chain, extension=True) as client:
        first = await send(client, message)
        again = await send(client, message)
    assert again.id == first.id == task.id
    await eventually(lambda: _state(chain, task.id) == COMPLETED)
    assert len(chain.authorizations()) == 1 and len(chain.payments_at_bob(task.id)) == 1
    assert transfers(chain) == [(chain.alice.aid, chain.bob.aid, 50)]


async def test_two_concurrent_payment_messages_pay_once(chain: Chain) -> None:
    task = await quoted(chain, "h", "translate")

    async def pay_once():
        async with sdk_client(chain, extension=True) as client:
            return await send(client, user("paying", task_id=task.id,
                                           context_id=task.context_id,
                                           metadata={STATUS: "payment-submitted"}))

    results = await asyncio.gather(pay_once(), pay_once(), return_exceptions=True)
    assert any(not isinstance(result, BaseException) for result in results), results
    await eventually(lambda: _state(chain, task.id) == COMPLETED)
    assert len(chain.authorizations()) == 1 and len(chain.payments_at_bob(task.id)) == 1
    assert transfers(chain) == [(chain.alice.aid, chain.bob.aid, 50)]


async def declared(chain: Chain, aid: str | None = None) -> list[str]:
    url = chain.agent_url() if aid is None else chain.agent_url().replace(chain.bob.aid, aid)
    async with httpx.AsyncClient(headers=chain.headers(extension=False)) as http:
        card = (await http.get(url)).json()
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
                                "parts": [{"text": "v02"}],
                                "metadata": {SKILL_KEY: "translate"}}}}, timeout=30)
        assert answer.headers["X-A2A-Extensions"] == v02
        waiting = answer.json()["result"]["task"]  # answered once the node decided
        assert waiting["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert "anet.reason" not in waiting["metadata"]  # the client may submit: it activated
        # An agent that charges nothing: carol, at the same hub, no prices.
        async with running_node(tmp_path / "carol", hub_url=chain.hub.url) as carol:
            assert X402 not in await declared(chain, carol.aid)
    assert_ledger_conserved(tmp_path / "hub")
    async with paying_chain(tmp_path / "untiered", tiers={}) as chain:
        await chain.credit("1.00")
        assert X402 not in await declared(chain)  # no tier: the node pays nothing itself
    assert_ledger_conserved(tmp_path / "untiered" / "hub")


async def test_a_skill_bobs_card_does_not_list_is_a_clear_error(chain: Chain) -> None:
    async with sdk_client(chain, extension=True) as client:
        with pytest.raises(InvalidParamsError) as refused:
            await send(client, user("x", "paint"))
    assert "'paint'" in str(refused.value)
    assert "work, translate, review, abroad" in str(refused.value)
    assert chain.authorizations() == [] and chain.worker.served == []
