"""The payer's daemon restarted and killed: the day's spend survives a restart, and a SIGKILL
after the node signed a payment but before the task layer sent it ends with that same
authorization re-sent, never a second one. Alice is a real daemon process here (``anet up``),
bob's node (module x402's provider, prices in his config.json) runs in this process
(tests/x402/paying.py), the hub is a real process."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sqlite3
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import TaskState

from anet_a2a.state import StateDir
from anet_core.node import Node
from anet_core.settings import Settings
from tests.support.nodes import prepare, running_node
from tests.support.payments import assert_ledger_conserved, ledger_totals
from tests.support.processes import HubProcess, NodeDir, free_port
from tests.support.waiting import eventually
from tests.x402.paying import (
    STATUS,
    TIERS,
    X402,
    Worker,
    bob_config,
    bob_plugins,
    metadata_of,
    payments_at,
    send,
    user,
)

pytestmark = pytest.mark.timeout(180)


@dataclass
class DaemonChain:
    hub: HubProcess
    alice: NodeDir
    bob: Node
    worker: Worker

    @property
    def bob_aid(self) -> str:
        return self.bob.aid

    @property
    def state(self) -> StateDir:
        return StateDir.of(Settings(data_dir=self.alice.root).paths)

    def agent_url(self) -> str:
        address = self.state.address_file.read_text().strip()
        return f"http://{address}/a2a/v1/agents/{self.bob_aid}"

    def headers(self) -> dict[str, str]:
        token = self.state.token_file.read_text().strip()
        return {"Authorization": f"Bearer {token}", "A2A-Extensions": X402}

    def authorizations(self) -> list[tuple[str, str]]:
        path = self.alice.root / "modules" / "x402" / "payer.db"
        with sqlite3.connect(path) as db:
            return list(db.execute("SELECT task_id, nonce FROM authorizations"))

    def restart(self) -> None:
        self.alice.run("up")
        self.alice.wait_registered()

    def task(self, task_id: str) -> dict[str, Any]:
        return json.loads(self.alice.run("task", task_id, "--json").stdout)


@asynccontextmanager
async def daemon_chain(root: Path, tiers: dict[str, Any]) -> AsyncIterator[DaemonChain]:
    hub = HubProcess(root / "hub", free_port()).start()
    alice = NodeDir(root / "alice")
    try:
        node, x402 = bob_config()
        prepare(root / "bob", node=node, modules={"x402": x402})
        worker = Worker()
        async with running_node(root / "bob", bob_plugins(worker), hub_url=hub.url) as bob:
            await asyncio.to_thread(alice.run, "init")
            alice.configure(x402=tiers)
            await asyncio.to_thread(alice.run, "join", hub.url)
            await asyncio.to_thread(alice.run, "up")
            await asyncio.to_thread(alice.wait_registered)
            aid = (await asyncio.to_thread(alice.status))["aid"]
            bob.tasks.trust(aid)
            await asyncio.to_thread(alice.run, "hub", "credit", aid, "5.00", "--data",
                                    str(hub.data))
            yield DaemonChain(hub=hub, alice=alice, bob=bob, worker=worker)
    finally:
        alice.stop()
        hub.stop()
    assert_ledger_conserved(root / "hub")


@asynccontextmanager
async def client(chain: DaemonChain):
    async with httpx.AsyncClient(headers=chain.headers(), timeout=30) as http:
        made = await ClientFactory(ClientConfig(
            httpx_client=http, streaming=False,
            supported_protocol_bindings=["JSONRPC"])).create_from_url(chain.agent_url())
        try:
            yield made
        finally:
            await made.close()


async def declared(chain: DaemonChain) -> None:
    """Alice's proxy card of bob declares a2a-x402: alice read her credit."""
    async def card() -> bool:
        async with httpx.AsyncClient(headers=chain.headers()) as http:
            found = (await http.get(chain.agent_url())).json()
        return X402 in [e["uri"] for e in found["capabilities"].get("extensions", [])]
    await eventually(card, "alice's proxy card declares a2a-x402")


async def quote_and_pay(chain: DaemonChain, text: str, skill: str) -> Any:
    async with client(chain) as sdk:
        task = await send(sdk, user(text, skill))
        assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert "anet.reason" not in metadata_of(task)
        await send(sdk, user("paying", task_id=task.id, context_id=task.context_id,
                             metadata={STATUS: "payment-submitted"}))
    return task


async def test_the_days_spend_survives_a_restart(tmp_path: Path) -> None:
    tiers = {**TIERS, "agent_daily_max": {"USD": "0.90"}}
    async with daemon_chain(tmp_path, tiers) as chain:
        await declared(chain)
        first = await quote_and_pay(chain, "one", "translate")  # 0.50 USD
        await eventually(lambda: chain.task(first.id)["status"]["state"]
                         == "TASK_STATE_COMPLETED", "the first task paid and done")
        await asyncio.to_thread(chain.alice.run, "stop")
        await asyncio.to_thread(chain.restart)
        await declared(chain)
        async with client(chain) as sdk:
            second = await send(sdk, user("two", "translate"))
        # 0.50 + 0.50 is above the day's 0.90: the operator's turn.
        assert second.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert metadata_of(second)["anet.reason"] == "needs_operator_approval"
        assert [task for task, _ in chain.authorizations()] == [first.id]
        doctor = json.loads(chain.alice.run("doctor", "--json", check=False).stdout)
        tiers, = (check for check in doctor["checks"] if check["name"] == "x402-tiers")
        assert "today 0.50 of 0.90" in tiers["summary"], tiers
    assert [entry.amount for entry in ledger_totals(tmp_path / "hub").transfers] == [50]


@contextmanager
def store_locked(root: Path) -> Iterator[None]:
    """Hold the write lock of alice's anet.db: her task layer cannot store the payment message
    it is about to send (it waits for the lock)."""
    db = sqlite3.connect(root / "anet.db", isolation_level=None)
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    finally:
        db.execute("ROLLBACK")
        db.close()


async def test_killed_after_signing_the_same_authorization_is_sent(tmp_path: Path) -> None:
    tiers = {**TIERS, "agent_daily_max": {"USD": "5.00"}}
    async with daemon_chain(tmp_path, tiers) as chain:
        await declared(chain)
        async with client(chain) as sdk:
            task = await send(sdk, user("crash", "translate"))
            assert task.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
            pid = chain.alice.status()["pid"]
            with store_locked(chain.alice.root):
                paying = asyncio.ensure_future(send(sdk, user(
                    "paying", task_id=task.id, context_id=task.context_id,
                    metadata={STATUS: "payment-submitted"})))
                signed = await eventually(chain.authorizations, "alice signed the payment")
                os.kill(pid, signal.SIGKILL)  # signed, the message not stored, nothing sent
            with pytest.raises(Exception):  # noqa: B017 - the daemon died under the call
                await paying
        assert payments_at(chain.bob, task.id) == []
        await asyncio.to_thread(chain.restart)
        await eventually(lambda: payments_at(chain.bob, task.id), "bob got the payment")
        await eventually(lambda: chain.task(task.id)["status"]["state"]
                         == "TASK_STATE_COMPLETED", "the task paid and done")
        [answer] = payments_at(chain.bob, task.id)
        sent = answer["metadata"]["x402.payment.payload"]
        assert sent["payload"]["authorization"]["nonce"] == signed[0][1]
        assert chain.authorizations() == signed
        assert [message["parts"] for message in chain.worker.served] == [[{"text": "crash"}]]
    assert [entry.amount for entry in ledger_totals(tmp_path / "hub").transfers] == [50]
