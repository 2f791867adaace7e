"""Every step of one paid task is a record of an evidence chain, on the payer (the hold, the
signature, the receipt) and on the payee (the quote, the verification, the settlement, the
receipt), and ``anet evidence verify`` checks both chains with them; ``anet doctor`` tells the
payer's tiers, credit and spend today. Two real nodes at a real hub process, read with the
commands an operator runs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from anet_core.control.client import AsyncControlClient
from tests.support.messages import user_message
from tests.support.processes import NodeDir
from tests.support.waiting import eventually
from tests.x402.payee import SKILL, payer_and_payee
from tests.x402.paying import TIERS

pytestmark = pytest.mark.timeout(120)


def records(node_dir: Path, task_id: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = NodeDir(node_dir).json("evidence", "list", "--kind",
                                                         "payment.*", "--task", task_id)
    return found


async def test_one_paid_task_leaves_its_records_on_payer_and_payee_and_both_chains_verify(
        tmp_path: Path) -> None:
    async with payer_and_payee(tmp_path, "0.70", TIERS) as pair:
        task = await pair.alice.tasks.send(pair.bob.aid, user_message("sum", "m-1"),
                                           skill=SKILL)
        task_id = task["id"]
        await eventually(lambda: pair.task(task_id)["status"]["state"]
                         == "TASK_STATE_INPUT_REQUIRED", "quoted and held")
        await eventually(lambda: pair.task(task_id)["metadata"].get("anet.reason")
                         == "payment_extension_not_activated", "held for want of the extension")
        async with AsyncControlClient(pair.alice.paths) as control:
            paid = await control.post(f"/x402/agent-pay/{task_id}", {})
        await eventually(lambda: pair.task(task_id)["status"]["state"]
                         == "TASK_STATE_COMPLETED", "paid, worked and settled")
        receipt = pair.task(task_id)["status"]["message"]["metadata"]["x402.payment.receipts"][0]

    payer = records(tmp_path / "alice", task_id)
    assert [record["kind"] for record in payer] == ["payment.refuse", "payment.authorize",
                                                    "payment.receipt"]
    refuse, authorize, payer_receipt = (record["data"] for record in payer)
    # The payer keeps the receipt it paid for, checked against the hub's key.
    assert payer_receipt["settlement"] == receipt["extra"]["settlement"]
    assert (payer_receipt["verified"], payer_receipt["peer"]) == (True, pair.bob.aid)
    assert refuse["reason"] == "payment_extension_not_activated"
    assert (authorize["tier"], authorize["amount"], authorize["nonce"]) == (
        "agent", "70", paid["nonce"])

    payee = records(tmp_path / "bob", task_id)
    assert [record["kind"] for record in payee] == ["payment.quote", "payment.verify",
                                                    "payment.settle", "payment.receipt"]
    quote, verify, settle, payee_receipt = (record["data"] for record in payee)
    assert quote["accepts"][0]["amount"] == "70"
    assert verify["payer"] == pair.alice.aid
    assert settle["success"] is True and settle["transaction"] == receipt["transaction"]
    assert payee_receipt["settlement"] == receipt["extra"]["settlement"]
    assert payee_receipt["settlement"]["nonce"] == paid["nonce"]

    for name in ("alice", "bob"):
        verified = NodeDir(tmp_path / name).run("evidence", "verify")
        assert verified.returncode == 0, verified.stdout + verified.stderr


async def test_the_doctor_reports_the_tiers_the_credit_and_todays_spend(tmp_path: Path) -> None:
    async with payer_and_payee(tmp_path, "0.70", TIERS) as pair:
        task = await pair.alice.tasks.send(pair.bob.aid, user_message("sum", "m-1"),
                                           skill=SKILL)
        await eventually(lambda: pair.task(task["id"])["metadata"].get("anet.reason")
                         == "payment_extension_not_activated", "held")
        async with AsyncControlClient(pair.alice.paths) as control:
            await control.post(f"/x402/agent-pay/{task['id']}", {})
        await eventually(lambda: pair.task(task["id"])["status"]["state"]
                         == "TASK_STATE_COMPLETED", "paid")
        doctor = NodeDir(tmp_path / "alice").json("doctor", "x402-tiers", "x402-credit")
        payee = NodeDir(tmp_path / "bob").json("doctor", "x402-tiers")
    # bob only charges: no tier to warn about.
    [bob_tiers] = payee["checks"]
    assert (bob_tiers["status"], payee["ok"]) == ("ok", True), bob_tiers
    assert "charges for its skills" in bob_tiers["summary"]
    checks = {check["name"]: check for check in doctor["checks"]}
    assert doctor["ok"] is True
    assert checks["x402-tiers"]["status"] == "ok"
    assert checks["x402-tiers"]["summary"] == "USD: auto 0.10, agent 1.00, today 0.70 of 1.20"
    assert checks["x402-credit"]["status"] == "ok"
    assert checks["x402-credit"]["summary"] == "credit at the home rail: 4.30 USD"
