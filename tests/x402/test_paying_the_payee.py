"""The payer's signing service against the module x402's own payee (priced skills, quotes,
verification and settlement at the hub's rail): two real nodes with every module and a real hub
process. The skill is named through the task layer (``skill=``), the way a priced skill is
asked for."""

from __future__ import annotations

import asyncio
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any

import pytest

from anet_core import hookimpl
from tests.support.messages import user_message
from tests.support.payments import ledger_totals
from tests.support.waiting import eventually
from tests.x402.payee import SKILL, PaidPair, Worker, payer_and_payee
from tests.x402.paying import STATUS, TIERS

pytestmark = pytest.mark.timeout(120)


def priced(root: Path, price: str) -> AbstractAsyncContextManager[PaidPair]:
    return payer_and_payee(root, price, TIERS)


async def test_a_quote_within_the_automatic_tier_is_paid_settled_and_worked(
        tmp_path: Path) -> None:
    async with priced(tmp_path, "0.05") as pair:
        task = await pair.alice.tasks.send(pair.bob.aid, user_message("go", "m-1"), skill=SKILL)
        await eventually(lambda: pair.task(task["id"])["status"]["state"]
                         == "TASK_STATE_COMPLETED", "paid and done")
        done = pair.task(task["id"])
        receipts = done["status"]["message"]["metadata"]["x402.payment.receipts"]
        assert [receipt["success"] for receipt in receipts] == [True]
        assert len(pair.worker.served) == 1
    transfers = ledger_totals(tmp_path / "hub").transfers
    assert [(entry.payer, entry.amount) for entry in transfers] == [(pair.alice.aid, 5)]


async def test_above_the_automatic_tier_the_payee_is_paid_once_the_client_submits(
        tmp_path: Path) -> None:
    async with priced(tmp_path, "0.50") as pair:
        task = await pair.alice.tasks.send(
            pair.bob.aid, user_message("go", "m-1", extensions=[
                "https://github.com/google-a2a/a2a-x402/v0.1"]), skill=SKILL)
        await eventually(lambda: pair.task(task["id"])["status"]["state"]
                         == "TASK_STATE_INPUT_REQUIRED", "quoted")
        await pair.alice.tasks.send(pair.bob.aid, user_message(
            "pay", "m-2", taskId=task["id"], contextId=task["contextId"],
            extensions=["https://github.com/google-a2a/a2a-x402/v0.1"],
            metadata={STATUS: "payment-submitted"}))
        await eventually(lambda: pair.task(task["id"])["status"]["state"]
                         == "TASK_STATE_COMPLETED", "paid and done")
    transfers = ledger_totals(tmp_path / "hub").transfers
    assert [(entry.payer, entry.amount) for entry in transfers] == [(pair.alice.aid, 50)]


class SilentWorker(Worker):
    """Takes the paid task and never delivers."""

    @hookimpl
    def anet_take_task(self, node, task):  # type: ignore[no-untyped-def]
        claim = super().anet_take_task(node, task)
        if claim is None:
            return None

        async def serve(task: Any, responder: Any) -> None:
            self.served.append(task.message)
            await asyncio.Event().wait()  # until the node stops

        return type(claim)(module=claim.module, serve=serve)


async def test_a_payee_that_never_delivers_is_never_paid(tmp_path: Path) -> None:
    """The payment settles only when the work ends: a payee that verified the payment and then
    never delivers moves nothing, and the payer's task waits in working."""
    worker = SilentWorker()
    async with payer_and_payee(tmp_path, "0.05", TIERS, worker=worker) as pair:
        task = await pair.alice.tasks.send(pair.bob.aid, user_message("go", "m-1"), skill=SKILL)
        await eventually(lambda: len(worker.served) == 1, "bob took the paid task")
        await eventually(lambda: pair.task(task["id"])["status"]["state"]
                         == "TASK_STATE_WORKING", "alice sees the work running")
        totals = ledger_totals(tmp_path / "hub")
        assert totals.transfers == []
        assert totals.balance(pair.alice.aid, "USD") == 500
