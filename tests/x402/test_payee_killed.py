"""The payee's daemon SIGKILLed at the worst moments of a paid task: after the payment verified,
and after the hub settled but before the payee heard it. On restart the task ends with its
receipt and no money moved twice (the rail answers a settled nonce with the original
settlement). A real hub (its settle answers can be held back), alice in this process, bob a
daemon process with module x402."""

from __future__ import annotations

import asyncio
import json
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from aiohttp import web

from anet_core.daemon import running_pid
from anet_core.protocol.payments import verify_settlement
from anet_core.settings import DataPaths
from anet_hub import admin
from anet_hub.app import HubConfig, build_app
from tests.support.hubs import RunningHub, loopback_socket
from tests.support.nodes import running_node
from tests.support.payments import assert_ledger_conserved, ledger_totals
from tests.support.processes import ANET, REPO, anet_async
from tests.support.waiting import eventually
from tests.x402.payee import (
    PRICES,
    SKILL,
    Pair,
    alice_and_bob,
    payment,
    quote_of,
    submitted,
)

pytestmark = pytest.mark.timeout(150)

COMPLETED = "TASK_STATE_COMPLETED"


@dataclass
class HeldSettle:
    """Holds the hub's answers to ``/x402/<operation>`` (settle: after the hub settled) while
    ``holding``."""

    holding: bool = False
    operation: str = "settle"
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)

    def middleware(self):  # type: ignore[no-untyped-def]
        @web.middleware
        async def hold(request: web.Request, handler):  # type: ignore[no-untyped-def]
            response = await handler(request)
            if self.holding and request.path.endswith(f"/x402/{self.operation}"):
                self.settled.set()
                await self.release.wait()
            return response

        return hold


@asynccontextmanager
async def hub_holding(root: Path, held: HeldSettle) -> AsyncIterator[RunningHub]:
    hub = RunningHub(HubConfig(data_dir=root / "hub"))
    app = build_app(hub.config)
    app.middlewares.append(held.middleware())
    runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
    await runner.setup()
    sock = loopback_socket()
    await web.SockSite(runner, sock).start()
    hub.runner, hub.port = runner, sock.getsockname()[1]
    try:
        yield hub
    finally:
        held.release.set()
        await hub.stop()


async def start_bob(root: Path, hub_url: str | None = None) -> None:
    if hub_url is not None:
        await anet_async(root, "init")
        config = json.loads((root / "config.json").read_text())
        config["node"] = {"name": "bob", "description": "bob's agent",
                          "skills": [{"id": SKILL, "name": "Summarize"}]}
        config.setdefault("modules", {})["x402"] = {"prices": PRICES}
        (root / "config.json").write_text(json.dumps(config))
        await anet_async(root, "join", hub_url)
    await anet_async(root, "up", disabled="a2a")

    async def registered() -> bool:
        status = await anet_async(root, "status", "--json", check=False)
        return status.returncode == 0 and \
            json.loads(status.stdout).get("hub", {}).get("state") == "registered"

    await eventually(registered, "bob registered")


def kill_bob(root: Path) -> None:
    pid = running_pid(DataPaths(root))
    assert pid is not None
    os.kill(pid, signal.SIGKILL)


@asynccontextmanager
async def alice_and_bob_daemon(root: Path, hub: RunningHub) -> AsyncIterator[tuple[Pair, Path]]:
    bob_root = root / "bob"
    await start_bob(bob_root, hub.url)
    try:
        async with running_node(root / "alice", hub_url=hub.url) as alice:
            await anet_async(bob_root, "trust", "add", alice.aid)
            await asyncio.to_thread(admin.credit, hub.config.data_dir, alice.aid, "1.00", "USD")
            bob = await alice.hub.peer(json.loads(
                (await anet_async(bob_root, "status", "--json")).stdout)["aid"])
            yield Pair(alice, _Remote(bob.aid)), bob_root  # type: ignore[arg-type]
    finally:
        await anet_async(bob_root, "stop", check=False)


@dataclass
class _Remote:
    """bob as alice's tests see a node in another process: its AID."""

    aid: str


async def paid_and_in_inbox(pair: Pair, bob_root: Path) -> dict:
    task = await pair.ask()
    await pair.answer(task, submitted(payment(pair, quote_of(pair, task["id"])["accepts"][0])))

    async def in_inbox() -> bool:
        inbox = json.loads((await anet_async(bob_root, "inbox", "--json")).stdout)
        return any(item["id"] == task["id"] for item in inbox)

    await eventually(in_inbox, "the paid task in bob's inbox")
    return task


def settled_once(pair: Pair, hub: RunningHub, task_id: str) -> None:
    done = pair.task(task_id)
    assert done["status"]["state"] == COMPLETED
    assert done["artifacts"][0]["parts"] == [{"text": "done"}]
    metadata = done["status"]["message"]["metadata"]
    assert metadata["x402.payment.status"] == "payment-completed"
    receipt = metadata["x402.payment.receipts"][-1]
    assert receipt["success"] is True
    settlement = verify_settlement(receipt["extra"]["settlement"],
                                   hub.state.identity.verified_history)
    assert settlement.task == task_id
    totals = assert_ledger_conserved(hub.config.data_dir)
    assert len(totals.transfers) == 1, totals.transfers
    assert totals.balance(pair.alice.aid) == 95


async def test_payee_killed_after_the_payment_verified(tmp_path: Path) -> None:
    held = HeldSettle()
    async with hub_holding(tmp_path, held) as hub, \
            alice_and_bob_daemon(tmp_path, hub) as (pair, bob_root):
        task = await paid_and_in_inbox(pair, bob_root)
        kill_bob(bob_root)
        await start_bob(bob_root)
        assert ledger_totals(hub.config.data_dir).transfers == []  # verify moved nothing
        await anet_async(bob_root, "reply", task["id"], "done")
        await eventually(lambda: pair.state(task["id"]) == COMPLETED, "the task completed")
        settled_once(pair, hub, task["id"])


async def test_payee_killed_after_the_hub_settled(tmp_path: Path) -> None:
    held = HeldSettle()
    async with hub_holding(tmp_path, held) as hub, \
            alice_and_bob_daemon(tmp_path, hub) as (pair, bob_root):
        task = await paid_and_in_inbox(pair, bob_root)
        held.holding = True
        env = {**os.environ, "ANET_DATA_DIR": str(bob_root)}
        reply = await asyncio.create_subprocess_exec(
            *ANET, "reply", task["id"], "done", env=env, cwd=REPO,
            stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
        try:
            await asyncio.wait_for(held.settled.wait(), 30)
            assert len(ledger_totals(hub.config.data_dir).transfers) == 1  # the money moved
            kill_bob(bob_root)  # before bob heard the hub's answer
        finally:
            await reply.wait()
        held.holding = False
        held.release.set()
        await start_bob(bob_root)  # finishes the task: settles again, gets the original
        await eventually(lambda: pair.state(task["id"]) == COMPLETED, "the task completed")
        settled_once(pair, hub, task["id"])
        receipt = pair.status_metadata(task["id"])["x402.payment.receipts"][-1]
        assert receipt["extra"].get("recovered") is True


async def test_a_payment_whose_check_a_stop_interrupted_is_checked_again(tmp_path: Path) -> None:
    held = HeldSettle(holding=True, operation="verify")
    async with hub_holding(tmp_path, held) as hub:
        async with alice_and_bob(tmp_path, hub.url) as pair:
            await asyncio.to_thread(admin.credit, hub.config.data_dir, pair.alice.aid, "1.00",
                                    "USD")
            task = await pair.ask()
            await pair.answer(task, submitted(payment(pair, quote_of(pair, task["id"])[
                "accepts"][0])))
            await asyncio.wait_for(held.settled.wait(), 30)  # bob is verifying: stop him now
        held.holding = False
        held.release.set()
        async with alice_and_bob(tmp_path, hub.url) as pair:  # the answer is not sent again
            await eventually(lambda: pair.bob.tasks.inbox(), "the paid task in bob's inbox")
            await pair.bob.tasks.reply(task["id"], "done")
            await eventually(lambda: pair.state(task["id"]) == COMPLETED, "the task completed")
            settled_once(pair, hub, task["id"])
