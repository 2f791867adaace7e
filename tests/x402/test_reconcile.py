"""``anet balance --reconcile``: a node's evidence chain against its home hub's ledger. Two real
nodes at a real hub process, read with the command an operator runs; and the rule itself on
made-up entries and receipts."""

from __future__ import annotations

import asyncio
import json
import shutil
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from anet_core.evidence import EvidenceChain
from anet_core.identity import Identity
from anet_core.settings import DataPaths
from anet_x402.rail import rail_url
from anet_x402.reconcile import READ_FILE, differences, read_receipts
from tests.support.messages import user_message
from tests.support.payments import ledger_totals, pay, quote
from tests.support.processes import NodeDir
from tests.support.waiting import eventually
from tests.x402.payee import SKILL, payer_and_payee
from tests.x402.paying import TIERS

pytestmark = pytest.mark.timeout(120)

ME, THEM = "a" * 32, "b" * 32


def transfer(transaction: str, task: str, amount: str = "0.05") -> dict[str, Any]:
    return {"kind": "transfer", "payer": ME, "payee": THEM, "asset": "USD", "amount": amount,
            "transaction": transaction, "task": task}


def receipt(transaction: str, task: str, amount: str = "5", **more: Any) -> dict[str, Any]:
    return {"taskId": task, "settlement": {"transaction": transaction, "task": task,
                                           "amount": amount, "asset": "USD"}} | more


def test_every_difference_names_its_transaction_and_task() -> None:
    entries = [{"kind": "credit", "payee": ME, "asset": "USD", "amount": "1.00",
                "transaction": "c-1"},
               transfer("tx-kept", "t-1"), transfer("tx-lost", "t-2"),
               transfer("tx-twice", "t-3"), transfer("tx-forged", "t-4"),
               transfer("tx-other", "t-5")]
    receipts = [receipt("tx-kept", "t-1"), receipt("tx-twice", "t-3"),
                receipt("tx-twice", "t-3"),
                receipt("tx-forged", "t-4", verified=False, problem="another key"),
                receipt("tx-other", "t-5", amount="6"), receipt("tx-ghost", "t-6")]
    found = differences(ME, entries, receipts)
    assert len(found) == 5, found
    forged, ghost, lost, other, twice = sorted(found)
    assert lost.startswith("tx-lost:") and "paid " + THEM in lost and "t-2" in lost
    assert "no such transfer" in ghost and "t-6" in ghost
    assert "2 receipts" in twice
    assert "did not verify: another key" in forged
    assert "0.06 USD" in other and "0.05 USD" in other
    assert differences(ME, entries[:2], receipts[:1]) == []


def test_the_chain_is_read_once_and_again_from_its_start_only_when_it_does_not_continue(
        tmp_path: Path) -> None:
    """A reconcile reads the records appended since the last one (a change to a record read
    before is ``anet evidence verify``'s to find); a chain that does not continue what was
    read (a new one) is read from its start."""
    paths = DataPaths(tmp_path / "node")
    identity = Identity.create(paths.identity)
    chain = EvidenceChain(paths.evidence_chain, identity)
    chain.append_all([("task.accepted", {"taskId": "t-1"}),
                      ("payment.receipt", receipt("tx-1", "t-1"))])
    history = identity.verified_history
    assert [item["taskId"] for item in read_receipts(paths, history).receipts] == ["t-1"]
    assert (paths.module_dir("x402") / READ_FILE).exists()
    chain.append("payment.receipt", receipt("tx-2", "t-2"))
    lines = paths.evidence_chain.read_bytes().splitlines(keepends=True)
    paths.evidence_chain.write_bytes(lines[0] + lines[1].replace(b"t-1", b"t-9") + lines[2])
    again = read_receipts(paths, history)
    assert ([item["taskId"] for item in again.receipts], again.broken) == (["t-1", "t-2"], [])
    (paths.module_dir("x402") / READ_FILE).unlink()
    whole = read_receipts(paths, history)
    assert [item["taskId"] for item in whole.receipts] == ["t-2"]
    assert whole.broken == ["the chain's record 1 does not verify: record seq 1 does not match "
                            "its hash: its content was changed"]
    shutil.rmtree(paths.evidence_chain.parent)  # moved away: a new chain starts
    EvidenceChain(paths.evidence_chain, identity).append("payment.receipt",
                                                         receipt("tx-3", "t-3"))
    assert [item["taskId"] for item in read_receipts(paths, history).receipts] == ["t-3"]


async def test_the_chain_and_the_ledger_agree_and_a_transfer_without_receipt_is_named(
        tmp_path: Path) -> None:
    async with payer_and_payee(tmp_path, "0.05", TIERS) as pair:
        task = await pair.alice.tasks.send(pair.bob.aid, user_message("sum", "m-1"),
                                           skill=SKILL)
        await eventually(lambda: pair.task(task["id"])["status"]["state"]
                         == "TASK_STATE_COMPLETED", "paid within the automatic tier")
        alice, bob = NodeDir(tmp_path / "alice"), NodeDir(tmp_path / "bob")

        async def reconciled(node: NodeDir) -> dict[str, Any]:
            done = await asyncio.to_thread(node.run, "balance", "--reconcile", "--json",
                                           check=False)
            found: dict[str, Any] = json.loads(done.stdout)
            return found

        async def both_agree() -> bool:  # the receipts are appended a moment after the end
            return all(found["differences"] == []
                       for found in (await reconciled(alice), await reconciled(bob)))

        await eventually(both_agree, "both chains agree with the ledger")
        for found in (await reconciled(alice), await reconciled(bob)):
            assert (found["transfers"], found["receipts"]) == (1, 1), found
        doctor = await asyncio.to_thread(alice.json, "doctor", "x402-reconcile")
        assert doctor["checks"][0]["status"] == "ok", doctor
        # Money that moved outside any task of alice's node: a transfer her chain cannot show.
        hub_aid = json.loads(pair.alice.paths.hub_pin.read_text())["hubAid"]
        stray = pay(pair.alice.identity, quote(hub_aid=hub_aid, payee=pair.bob.aid,
                                               task="outside", amount=3))
        async with aiohttp.ClientSession() as session, session.post(
                f"{rail_url(pair.hub.url)}/x402/settle", json=stray) as answer:
            assert (await answer.json())["success"] is True
        [moved] = [entry for entry in ledger_totals(pair.hub.data).transfers
                   if entry.task == "outside"]
        found = await reconciled(alice)
        assert found["transfers"] == 2 and len(found["differences"]) == 1, found
        assert moved.transaction in found["differences"][0]
        assert "task outside" in found["differences"][0]
        text = await asyncio.to_thread(alice.run, "balance", "--reconcile", check=False)
        assert text.returncode == 1 and moved.transaction in text.stdout
        doctor = await asyncio.to_thread(alice.json, "doctor", "x402-reconcile")
        [check] = doctor["checks"]
        assert check["status"] == "warn" and moved.transaction in check["detail"], check
