"""The one-outcome invariant of a priced task (docs/payments.md, "Cancel and settlement"), for
every test that races or breaks a payment: whatever happened, the hub's ledger, both nodes'
tasks and both evidence chains tell one story.

- **paid**: exactly one transfer for the task in the ledger; the task completed on both nodes;
  the payer's task carries that transfer's receipt (successful, its settlement's transaction)
  and a verified provider receipt; each chain, the payer's and the payee's, holds one
  ``payment.receipt`` of it (the payer's verified against the hub's key);
- **not paid**: no transfer; the task ended on both nodes without completing; no successful
  payment receipt on the payer's task, no ``payment.receipt`` in either chain.

And the ledger is conserved either way. :func:`outcome_problems` names what does not hold (empty
when all does); :func:`assert_one_outcome` waits until it holds (messages and records arrive a
moment after the step that made them) and fails listing the problems at its deadline. The nodes
are named by their data directories and asked through their control planes, as an operator
would (``anet task``): a node in the test's loop and a daemon process, restarted or not, are
checked alike. Needs the hub module (the ledger is read from the hub's storage).
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from anet_core.api import AnetError, AsyncControlClient
from anet_core.node import Node
from anet_core.settings import DataPaths
from tests.support.payments import assert_conserved, ledger_totals_async
from tests.support.waiting import STEP_TIMEOUT_S

COMPLETED = "TASK_STATE_COMPLETED"
TERMINAL = frozenset({COMPLETED, "TASK_STATE_FAILED", "TASK_STATE_CANCELED",
                      "TASK_STATE_REJECTED"})
POLL_S = 0.1


def state_of(node: Node, task_id: str) -> str | None:
    """The task's state on ``node`` (the side it plays there), None when it has no such task."""
    stored = node.store.get_task(task_id)
    return None if stored is None else stored.state


def chain_records(paths: DataPaths, task_id: str, kind: str) -> list[dict[str, Any]]:
    """The data of the records of ``kind`` about ``task_id`` appended to the chain of the node
    in ``paths``."""
    chain = paths.evidence_chain
    lines = chain.read_text(encoding="utf-8").splitlines() if chain.exists() else []
    records = (json.loads(line) for line in lines)
    return [record["data"] for record in records
            if record["kind"] == kind and record["data"].get("taskId") == task_id]


async def task_on(paths: DataPaths, task_id: str) -> dict[str, Any] | str:
    """The task as the node in ``paths`` holds it (A2A JSON), or why it cannot be read."""
    async with AsyncControlClient(paths, timeout=10) as control:
        try:
            return dict(await control.get(f"/tasks/task/{task_id}"))
        except AnetError as error:
            return f"{error.reason}: {error.message}"


async def outcome_problems(hub_data: Path, payer: DataPaths, payee: DataPaths, task_id: str, *,
                           paid: bool | None = None) -> list[str]:
    """What breaks the invariant for ``task_id`` now (``paid``: the outcome the test expects,
    None for either); empty when it holds."""
    totals = assert_conserved(await ledger_totals_async(hub_data))
    transfers = [entry for entry in totals.transfers if entry.task == task_id]
    problems = []
    if len(transfers) > 1:
        problems.append(f"the hub moved the money {len(transfers)} times")
    moved = bool(transfers)
    if paid is not None and moved != paid:
        problems.append("the hub moved the money" if moved else "the hub moved no money")
    tasks = {side: await task_on(paths, task_id) for paths, side in ((payer, "the payer"),
                                                                     (payee, "the payee"))}
    for side, task in tasks.items():
        if isinstance(task, str):
            problems.append(f"{side}'s task cannot be read: {task}")
            continue
        state = task["status"]["state"]
        if state not in TERMINAL:
            problems.append(f"{side}'s task is {state}, not ended")
        elif moved != (state == COMPLETED):
            problems.append(f"{side}'s task ended {state}, and the hub moved "
                            f"{'the' if moved else 'no'} money")
    task = tasks["the payer"] if isinstance(tasks["the payer"], dict) else None
    metadata = (task["status"].get("message") or {}).get("metadata", {}) if task else {}
    receipts = [receipt for receipt in metadata.get("x402.payment.receipts", [])
                if receipt.get("success")]
    chains = {side: chain_records(paths, task_id, "payment.receipt")
              for paths, side in ((payer, "payer"), (payee, "payee"))}
    if moved:
        transaction = transfers[0].transaction
        if [receipt.get("transaction") for receipt in receipts][-1:] != [transaction]:
            problems.append(f"the payer's task has no receipt of {transaction}")
        if task is not None and task["metadata"].get("anet.receipt_verified") is not True:
            problems.append("the payer's task has no verified provider receipt")
        for side, records in chains.items():
            if [record["settlement"]["transaction"] for record in records] != [transaction]:
                problems.append(f"the {side}'s chain holds {len(records)} payment.receipt "
                                f"records, not one of {transaction}")
        if any(record.get("verified") is False for record in chains["payer"]):
            problems.append("the payer's payment.receipt did not verify")
    else:
        if receipts:
            problems.append("the payer's task carries a successful payment receipt")
        problems += [f"the {side}'s chain holds a payment.receipt"
                     for side, records in chains.items() if records]
    return problems


async def assert_one_outcome(hub_data: Path, payer: DataPaths, payee: DataPaths, task_id: str, *,
                             paid: bool | None = None, timeout: float = STEP_TIMEOUT_S) -> None:
    """Wait until :func:`outcome_problems` finds none; fail listing them at the deadline."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while problems := await outcome_problems(hub_data, payer, payee, task_id, paid=paid):
        if loop.time() > deadline:
            raise AssertionError(f"task {task_id} has no one outcome: " + "; ".join(problems))
        await asyncio.sleep(POLL_S)
