"""SIGKILL in the middle of the task path, counted (docs/performance.md, "Durability").

A real hub, alice and bob as real daemons (``python -m anet_core.daemon``), bob's backend the
official a2a-sdk server in this process, counting every message it is given. Batches of tasks
go through alice's local A2A endpoint; while they are in flight at every stage (in alice's
outbox, at the hub, at bob, at the backend, on their way back), one daemon is killed with
SIGKILL and started again, in turn. Then:

- every task the A2A client was given an id for is still at alice and settles: completed with
  a verified receipt, or waiting for bob's operator (bob restarted while serving it);
- the backend was given each message at most once, and only messages of those tasks;
- both evidence chains verify, and hold each step of each task once.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import uuid
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from anet_core.config import read_raw, write_config
from anet_core.demo.network import DemoNode, EmbeddedNetwork
from anet_core.evidence import read_records, verify
from anet_core.identity import Identity
from anet_core.wire import TaskState
from tests.support.sdk_backend import TOKEN, sdk_backend
from tests.support.waiting import eventually

pytest.importorskip("anet_backends")
pytest.importorskip("anet_a2a")

pytestmark = pytest.mark.timeout(240)

ROUNDS = 4
"""bob, alice, bob, alice."""
BATCH = 12
SETTLE_TIMEOUT_S = 60.0


def message(text: str) -> dict[str, Any]:
    return {"role": "ROLE_USER", "messageId": f"crash-{uuid.uuid4().hex}",
            "parts": [{"text": text}]}


def recorded(node: DemoNode, kind: str) -> Counter[str | None]:
    """How many records of ``kind`` ``node``'s chain holds, per task."""
    history = Identity.load(node.paths.identity).verified_history
    return Counter(record.task_id
                   for record in read_records(node.paths.evidence_chain, history, kind=kind))


async def kill(node: DemoNode) -> None:
    os.kill(node.child.pid, signal.SIGKILL)
    await node.child.process.wait()


def settled(task: dict[str, Any]) -> bool:
    state = TaskState(task["status"]["state"])
    waits_for_operator = task.get("metadata", {}).get("anet.reason") == "queued_for_operator"
    return state.is_settled or waits_for_operator


async def test_sigkill_loses_nothing_acknowledged_and_runs_nothing_twice() -> None:
    sockets = Path("/tmp") / f"anet-crash-{uuid.uuid4().hex[:8]}"  # sun_path is short
    sockets.mkdir(mode=0o700)
    try:
        async with sdk_backend(sockets / "backend.sock", streaming=True, token=TOKEN) as seen, \
                EmbeddedNetwork.open(prefix="anet-crash-") as network:
            token_file = network.work / "backend.token"
            token_file.write_text(TOKEN + "\n")
            token_file.chmod(0o600)
            await network.start_hub("the hub")
            alice = network.create_node("alice")
            bob = network.create_node("bob")
            raw = read_raw(bob.paths.config)
            raw.setdefault("modules", {})["backends"] = {
                "backends": [{"match": "*", "url": f"unix://{sockets / 'backend.sock'}",
                              "token_file": str(token_file)}],
                "retry": {"give_up_after": "0"}}
            write_config(bob.paths.config, raw)
            await asyncio.gather(network.start_node(alice), network.start_node(bob, a2a=False))
            await network.trust(bob, alice)
            await network.listed(alice, bob.aid)

            acknowledged: dict[str, str] = {}  # task id -> messageId
            sent: set[str] = set()
            for round_number in range(ROUNDS):
                victim = bob if round_number % 2 == 0 else alice
                batch = [message(f"hello {round_number}.{index}") for index in range(BATCH)]
                sent |= {item["messageId"] for item in batch}
                before = len(seen.messages)
                sends = [asyncio.ensure_future(network.jsonrpc(
                    alice, bob.aid, "SendMessage",
                    {"message": item, "configuration": {"returnImmediately": True}}))
                    for item in batch]
                # The worst moment: some tasks answered, others at every stage before.
                await eventually(lambda before=before: len(seen.messages) > before + 2,
                                 "the backend got the first tasks of the batch")
                await kill(victim)
                for item, outcome in zip(batch, await asyncio.gather(
                        *sends, return_exceptions=True), strict=True):
                    if isinstance(outcome, dict):
                        acknowledged[outcome["task"]["id"]] = item["messageId"]
                await network.start_node(victim, a2a=victim is alice)

            async def all_settled() -> bool:
                for task_id in acknowledged:
                    task = await network.jsonrpc(alice, bob.aid, "GetTask", {"id": task_id})
                    if not settled(task):
                        return False
                return True

            await eventually(all_settled, "every acknowledged task settles", SETTLE_TIMEOUT_S)
            outcomes, completed = Counter(), []
            for task_id in acknowledged:
                task = await network.jsonrpc(alice, bob.aid, "GetTask", {"id": task_id})
                outcomes[task["status"]["state"]] += 1
                if task["status"]["state"] == "TASK_STATE_COMPLETED":
                    completed.append(task_id)
                if task["status"]["state"] == "TASK_STATE_COMPLETED":
                    assert task["metadata"]["anet.receipt_verified"] is True, task
                    assert task["artifacts"], task

            given = Counter(item["messageId"] for item in seen.messages)
            assert max(given.values()) == 1, [key for key, count in given.items() if count > 1]
            assert set(given) <= sent
            # Acknowledged before a daemon died, each one ran (or waits for the operator).
            assert outcomes["TASK_STATE_COMPLETED"] >= 1
            assert len(acknowledged) >= ROUNDS * BATCH // 2
            # Each step of each task is in its node's chain once, whoever died when (the chain
            # appends a moment after the step: wait for the newest).
            for node, kind, tasks in ((alice, "task.forwarded", list(acknowledged)),
                                      (alice, "task.finished", completed),
                                      (bob, "task.answered", completed)):
                await eventually(lambda node=node, kind=kind, tasks=tasks: all(
                    recorded(node, kind)[task_id] for task_id in tasks), f"every {kind} record")
                assert {task_id: recorded(node, kind)[task_id] for task_id in tasks} == \
                    dict.fromkeys(tasks, 1), kind
            for node in (alice, bob):
                history = Identity.load(node.paths.identity).verified_history
                report = verify(node.paths.evidence_chain, history)
                assert report.ok, report.issues
    finally:
        shutil.rmtree(sockets, ignore_errors=True)
