"""A paid task from quote to receipt: a real hub rail and two real nodes; the hub's ledger is
conserved after every test."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path
from typing import Any

import pytest

from anet_core.evidence import verify
from anet_core.protocol.payments import verify_settlement
from anet_hub import admin
from anet_x402.provider import add_receipt
from tests.support.hubs import RunningHub
from tests.support.payments import assert_ledger_conserved, ledger_totals
from tests.support.waiting import eventually
from tests.x402.payee import (
    SKILL,
    Worker,
    alice_and_bob,
    payment,
    quote_of,
    submitted,
)

pytestmark = pytest.mark.timeout(90)

COMPLETED = "TASK_STATE_COMPLETED"
FAILED = "TASK_STATE_FAILED"


async def credit(hub: RunningHub, aid: str, amount: str = "1.00") -> None:
    await asyncio.to_thread(admin.credit, hub.config.data_dir, aid, amount, "USD")


async def test_a_correct_payment_runs_the_work_once_and_ends_with_a_receipt(
        tmp_path: Path, hub: RunningHub) -> None:
    worker = Worker()
    async with alice_and_bob(tmp_path, hub.url, worker=worker) as pair:
        await credit(hub, pair.alice.aid)
        task = await pair.ask("summarize the report")
        assert worker.served == []  # nothing reached the module before the payment
        option = quote_of(pair, task["id"])["accepts"][0]
        payload = payment(pair, option)
        # The same payment twice at once (two messages): one verify passes it on, once.
        await pair.answer(task, submitted(payload))
        await pair.answer(task, submitted(payload))
        await eventually(lambda: pair.state(task["id"]) == COMPLETED, "the paid task completed")
        done = pair.task(task["id"])
        assert done["artifacts"][0]["parts"] == [{"text": "the summary"}]
        assert [message["parts"] for message in worker.served] == [
            [{"text": "summarize the report"}]]  # the first message, once
        metadata = done["status"]["message"]["metadata"]
        assert metadata["x402.payment.status"] == "payment-completed"
        [receipt] = metadata["x402.payment.receipts"]
        assert receipt["success"] is True and receipt["amount"] == "5"
        settlement = verify_settlement(receipt["extra"]["settlement"],
                                       hub.state.identity.verified_history)
        assert (settlement.payer, settlement.payee, settlement.task) == (
            pair.alice.aid, pair.bob.aid, task["id"])
        assert done["metadata"]["anet.receipt_verified"] is True
        # A payment message for a task already paid runs nothing and settles nothing.
        await pair.answer(task, submitted(payload))
        await pair.answer(task, submitted(payment(pair, option)))
        await asyncio.sleep(0.5)
        assert len(worker.served) == 1
        totals = assert_ledger_conserved(hub.config.data_dir)
        assert len(totals.transfers) == 1
        assert totals.balance(pair.alice.aid) == 95 and totals.balance(pair.bob.aid) == 5
    chain = tmp_path / "bob" / "evidence" / "chain.jsonl"
    assert verify(chain, pair.bob.identity.verified_history).ok
    kinds = chain.read_text()
    for kind in ("payment.quote", "payment.verify", "payment.settle", "payment.receipt"):
        assert f'"{kind}"' in kinds, kind


async def test_the_operator_answers_a_paid_task_from_the_inbox(tmp_path: Path,
                                                               hub: RunningHub) -> None:
    async with alice_and_bob(tmp_path, hub.url) as pair:
        await credit(hub, pair.alice.aid)
        task = await pair.ask()
        await pair.answer(task, submitted(payment(pair, quote_of(pair, task["id"])["accepts"][0])))
        await eventually(lambda: pair.bob.tasks.inbox(), "the paid task in bob's inbox")
        await eventually(lambda: pair.task(task["id"])["metadata"].get("anet.reason")
                         == "queued_for_operator", "alice told it waits for bob")
        assert pair.state(task["id"]) == "TASK_STATE_WORKING"
        assert "payment-verified" in [message.get("metadata", {}).get("x402.payment.status")
                                      for message in pair.task(task["id"])["history"]]
        await pair.bob.tasks.reply(task["id"], "done by hand")
        await eventually(lambda: pair.state(task["id"]) == COMPLETED, "completed")
        receipts = pair.status_metadata(task["id"])["x402.payment.receipts"]
        assert [receipt["success"] for receipt in receipts] == [True]
    assert len(assert_ledger_conserved(hub.config.data_dir).transfers) == 1


async def test_a_payment_the_rail_refuses_fails_and_moves_nothing(tmp_path: Path,
                                                                   hub: RunningHub) -> None:
    worker = Worker()
    async with alice_and_bob(tmp_path, hub.url, worker=worker) as pair:
        task = await pair.ask()  # alice has no credit
        await pair.answer(task, submitted(payment(pair, quote_of(pair, task["id"])["accepts"][0])))
        await eventually(lambda: pair.state(task["id"]) == FAILED, "the payment refused")
        metadata = pair.status_metadata(task["id"])
        assert metadata["x402.payment.status"] == "payment-failed"
        assert metadata["x402.payment.error"] == "insufficient_funds"
        assert worker.served == []
    assert assert_ledger_conserved(hub.config.data_dir).transfers == []


async def test_an_unreachable_rail_is_quoted_again(tmp_path: Path, hub: RunningHub) -> None:
    async with alice_and_bob(tmp_path, hub.url) as pair:
        await credit(hub, pair.alice.aid)
        task = await pair.ask()
        option = quote_of(pair, task["id"])["accepts"][0]
        seq = pair.task(task["id"])["metadata"]["anet.state_seq"]
        pin = pair.bob.paths.hub_pin
        saved = pin.read_text()
        pin.write_text(saved.replace(f"127.0.0.1:{hub.port}", "127.0.0.1:9"))  # nobody there
        try:
            await pair.answer(task, submitted(payment(pair, option)))
            await eventually(lambda: pair.task(task["id"])["metadata"]["anet.state_seq"] > seq,
                             "bob answered the payment")
        finally:
            pin.write_text(saved)
        assert pair.state(task["id"]) == "TASK_STATE_INPUT_REQUIRED"
        metadata = pair.status_metadata(task["id"])
        assert metadata["x402.payment.status"] == "payment-required"
        assert "rail_unreachable" in metadata["x402.payment.required"]["error"]
        # Paying again once the rail answers goes through.
        await pair.answer(task, submitted(payment(pair, option)))
        await eventually(lambda: pair.bob.tasks.inbox(), "the paid task in bob's inbox")
    assert ledger_totals(hub.config.data_dir).transfers == []


async def test_a_v1_payload_is_accepted(tmp_path: Path, hub: RunningHub) -> None:
    worker = Worker()
    async with alice_and_bob(tmp_path, hub.url, worker=worker) as pair:
        await credit(hub, pair.alice.aid)
        task = await pair.ask()
        option = quote_of(pair, task["id"])["accepts"][0]
        v2 = payment(pair, option)
        v1 = {"x402Version": 1, "scheme": option["scheme"], "network": option["network"],
              "payload": v2["payload"]}
        await pair.answer(task, submitted(v1))
        await eventually(lambda: pair.state(task["id"]) == COMPLETED, "the paid task completed")
        assert pair.status_metadata(task["id"])["x402.payment.receipts"][0]["success"] is True
    assert len(assert_ledger_conserved(hub.config.data_dir).transfers) == 1


async def test_a_settlement_that_fails_withholds_the_result(tmp_path: Path,
                                                            hub: RunningHub) -> None:
    async with alice_and_bob(tmp_path, hub.url) as pair:
        await credit(hub, pair.alice.aid, "0.05")  # enough for one of the two
        first, second = await pair.ask("one"), await pair.ask("two")
        for task in (first, second):  # both verify: verify moves nothing
            await pair.answer(task, submitted(payment(pair, quote_of(pair, task["id"])[
                "accepts"][0])))
        await eventually(lambda: len(pair.bob.tasks.inbox()) == 2, "both paid tasks wait")
        await pair.bob.tasks.reply(first["id"], "first answer")
        await pair.bob.tasks.reply(second["id"], "second answer")
        await eventually(lambda: pair.state(second["id"]) == FAILED, "the second failed")
        assert pair.state(first["id"]) == COMPLETED
        failed = pair.task(second["id"])
        metadata = failed["status"]["message"]["metadata"]
        assert metadata["x402.payment.status"] == "payment-failed"
        assert metadata["x402.payment.error"] == "insufficient_funds"
        assert [receipt["success"] for receipt in metadata["x402.payment.receipts"]] == [False]
        assert not failed.get("artifacts")  # the work's result is withheld
    totals = assert_ledger_conserved(hub.config.data_dir)
    assert len(totals.transfers) == 1 and totals.balance(pair.alice.aid) == 0


async def test_a_quote_given_is_honoured_after_the_price_changed(tmp_path: Path,
                                                                 hub: RunningHub) -> None:
    async with alice_and_bob(tmp_path, hub.url) as pair:
        await credit(hub, pair.alice.aid)
        task = await pair.ask()
        option = quote_of(pair, task["id"])["accepts"][0]
    assert option["amount"] == "5"
    config = json.loads((tmp_path / "bob" / "config.json").read_text())
    config["modules"]["x402"]["prices"][SKILL]["amount"] = "0.10"
    (tmp_path / "bob" / "config.json").write_text(json.dumps(config))
    async with alice_and_bob(tmp_path, hub.url, prices={SKILL: {"amount": "0.10"}},
                             worker=Worker()) as pair:
        await pair.answer(task, submitted(payment(pair, option)))  # the old quote: 0.05
        await eventually(lambda: pair.state(task["id"]) == COMPLETED, "the paid task completed")
        fresh = await pair.ask()
        assert quote_of(pair, fresh["id"])["accepts"][0]["amount"] == "10"
    totals = assert_ledger_conserved(hub.config.data_dir)
    assert totals.balance(pair.bob.aid) == 5


async def test_the_doctor_checks_each_priced_skill_has_a_rail(tmp_path: Path,
                                                              hub: RunningHub) -> None:
    from anet_core.doctor import CheckContext
    from anet_core.plugins import make_plugins
    from anet_core.records import CheckStatus
    from anet_core.settings import Settings
    from anet_x402.provider_checks import prices_reachable

    async with alice_and_bob(tmp_path, hub.url, prices={
            SKILL: {"amount": "0.05"}, "echo": {"amount": "1", "asset": "USDC",
                                                "rails": ["home", "b" * 32]}}):
        pass
    context = CheckContext(Settings(data_dir=tmp_path / "bob"), make_plugins())
    result = await prices_reachable(context)
    assert result.status is CheckStatus.OK, result
    assert "summarize 0.05 USD" in result.summary
    await hub.stop()  # the rail does not answer now
    context = CheckContext(Settings(data_dir=tmp_path / "bob"), make_plugins())
    result = await prices_reachable(context)
    assert result.status is CheckStatus.FAIL and "did not answer" in result.detail


async def test_an_unreachable_rail_at_settlement_defers_the_end_until_it_answers(
        tmp_path: Path, hub: RunningHub, monkeypatch: pytest.MonkeyPatch) -> None:
    from anet_x402 import provider

    monkeypatch.setattr(provider, "UNREACHABLE_RETRY_S", 0.5)
    monkeypatch.setattr(provider, "SETTLE_RETRY_S", 0.1)
    async with alice_and_bob(tmp_path, hub.url) as pair:
        await credit(hub, pair.alice.aid)
        task = await pair.ask()
        await pair.answer(task, submitted(payment(pair, quote_of(pair, task["id"])["accepts"][0])))
        await eventually(lambda: pair.bob.tasks.inbox(), "the paid task in bob's inbox")
        await hub.stop()
        await pair.bob.tasks.reply(task["id"], "done")  # the rail does not answer: deferred
        received = pair.bob.tasks.received(task["id"])
        assert received is not None and received["status"]["state"] == "TASK_STATE_WORKING"
        again = await RunningHub(hub.config, port=hub.port).start()
        try:
            await eventually(lambda: pair.state(task["id"]) == COMPLETED, "completed", 90)
            unreachable, settled = pair.status_metadata(task["id"])["x402.payment.receipts"]
            assert settled["success"] is True
            attempts = unreachable["extra"]["attempts"]
            assert unreachable == {
                "success": False, "errorReason": "rail_unreachable",
                "errorMessage": unreachable["errorMessage"], "transaction": "",
                "network": unreachable["network"],
                "extra": {"attempts": attempts,
                          "firstAttemptAt": unreachable["extra"]["firstAttemptAt"],
                          "lastAttemptAt": unreachable["extra"]["lastAttemptAt"]}}
        finally:
            await again.stop()
    totals = assert_ledger_conserved(hub.config.data_dir)
    assert len(totals.transfers) == 1


async def test_an_expired_authorization_is_quoted_again(tmp_path: Path, hub: RunningHub) -> None:
    async with alice_and_bob(tmp_path, hub.url) as pair:
        await credit(hub, pair.alice.aid)
        task = await pair.ask()
        option = quote_of(pair, task["id"])["accepts"][0]
        seq = pair.task(task["id"])["metadata"]["anet.state_seq"]
        await pair.answer(task, submitted(payment(pair, option, now=int(time.time()) - 7200)))
        await eventually(lambda: pair.task(task["id"])["metadata"]["anet.state_seq"] > seq,
                         "bob answered the payment")
        assert pair.state(task["id"]) == "TASK_STATE_INPUT_REQUIRED"
        required = pair.status_metadata(task["id"])["x402.payment.required"]
        assert "authorization_expired" in required["error"]
        assert required["accepts"] == [option]
    assert ledger_totals(hub.config.data_dir).transfers == []


def test_a_rail_that_stays_unreachable_keeps_one_receipt_with_its_count() -> None:
    """A task waiting on a rail that is down tries again every 10 s: its receipts stay one per
    run of misses (the count, the first and the last time), not one a try."""
    missed = {"success": False, "errorReason": "rail_unreachable", "transaction": "",
              "network": "anet:h", "errorMessage": "the rail did not answer"}
    receipts: list[dict[str, Any]] = []
    appended = [add_receipt(receipts, missed, now=1000 + 10 * n) for n in range(8640 * 4)]
    assert appended == [True] + [False] * (8640 * 4 - 1)
    assert receipts == [missed | {"extra": {"attempts": 8640 * 4, "firstAttemptAt": 1000,
                                            "lastAttemptAt": 1000 + 10 * (8640 * 4 - 1)}}]
    refused = {"success": False, "errorReason": "authorization_expired", "transaction": "",
               "network": "anet:h"}
    assert add_receipt(receipts, refused, now=2_000_000)
    assert add_receipt(receipts, missed, now=2_000_010)
    assert [receipt["errorReason"] for receipt in receipts] == [
        "rail_unreachable", "authorization_expired", "rail_unreachable"]
    assert receipts[-1]["extra"]["attempts"] == 1
