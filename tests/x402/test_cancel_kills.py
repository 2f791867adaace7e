"""A cancel racing the payment of a priced task while a process dies: the payer's or the
payee's daemon SIGKILLed (or frozen, then killed) and restarted, or the hub restarted, at each
step around the cancel (docs/payments.md, "Cancel and settlement", the crash table).

Every process is real: ``anet hub serve``, and alice and bob as daemons started with
``anet up``, driven through their control planes as the CLI drives them (``anet cancel`` where
a test says). Both reach the hub through the loopback proxy of tests/x402/holding_proxy, which
holds one rail request (alice's void, bob's settle) before the hub or after the hub answered.
alice (automatic tier) pays bob (module x402, no backend: the paid task waits in his inbox
until the test replies). Each test ends with :func:`tests.support.outcomes.assert_one_outcome`
over the two data directories: one transfer exactly when the task completed with its receipt
on both nodes and in both chains; otherwise nothing moved and neither completed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from anet_core.api import AnetError, AsyncControlClient
from anet_core.daemon import running_pid
from anet_core.identity import Identity
from anet_core.settings import DataPaths
from anet_hub import admin
from tests.support.nodes import prepare
from tests.support.outcomes import TERMINAL, assert_one_outcome, task_on
from tests.support.processes import HubProcess, anet_async, free_port
from tests.support.waiting import STEP_TIMEOUT_S, eventually
from tests.x402.holding_proxy import Hold, Moment, RailProxy

pytestmark = pytest.mark.timeout(180)

SKILL = "summarize"
PRICES = {SKILL: {"amount": "0.05"}}
TIERS = {"auto_max": {"USD": "0.10"}}
RECOVERY_S = 60.0
"""A restarted process registers, and the payee's settle is asked again (every 10 s while
its rail is unreachable): within this."""
CANCELED = "TASK_STATE_CANCELED"


@dataclass
class Daemon:
    """A node's data directory and the daemon ``anet up`` starts over it."""

    root: Path
    aid: str

    @property
    def paths(self) -> DataPaths:
        return DataPaths(self.root)

    async def up(self) -> None:
        await anet_async(self.root, "up", disabled="a2a,mcp")
        await eventually(self.registered, f"{self.root.name} registered", RECOVERY_S)

    async def registered(self) -> bool:
        with contextlib.suppress(AnetError):
            return (await self.call("GET", "/hub/status"))["state"] == "registered"
        return False

    async def call(self, method: str, path: str, body: Any = None) -> Any:
        """The control plane's answer (what the ``anet`` command for it prints)."""
        async with AsyncControlClient(self.paths, timeout=STEP_TIMEOUT_S) as control:
            return await control.request(method, path, body)

    def signal(self, number: signal.Signals) -> None:
        pid = running_pid(self.paths)
        assert pid is not None, f"{self.root.name}'s daemon is not running"
        os.kill(pid, number)

    async def kill(self) -> None:
        """SIGKILL (a frozen daemon dies too): nothing closed, nothing flushed."""
        self.signal(signal.SIGKILL)
        await eventually(lambda: running_pid(self.paths) is None,
                         f"{self.root.name}'s daemon gone")

    async def stop(self) -> None:
        if running_pid(self.paths) is not None:
            with contextlib.suppress(ProcessLookupError):
                self.signal(signal.SIGCONT)
            await anet_async(self.root, "stop", check=False)


@dataclass
class Race:
    hub: HubProcess
    proxy: RailProxy
    alice: Daemon
    bob: Daemon

    async def paid_in_bobs_inbox(self) -> str:
        """A task alice sent and paid (verified at the rail), waiting in bob's inbox."""
        task = await self.alice.call("POST", "/tasks/send", {
            "aid": self.bob.aid, "text": "summarize this", "skill": SKILL})

        async def in_inbox() -> bool:
            inbox = (await self.bob.call("GET", "/tasks/inbox"))["tasks"]
            return any(item["id"] == task["id"] for item in inbox)

        await eventually(in_inbox, "the paid task in bob's inbox")
        return str(task["id"])

    def meanwhile(self, node: Daemon, path: str, body: dict[str, Any]) -> asyncio.Task[Any]:
        """A control call on its way while the test interleaves a fault with it; its answer
        (or the failure of a daemon killed under it) is the test's to read."""
        return asyncio.create_task(node.call("POST", path, body))

    def reply_meanwhile(self, task_id: str) -> asyncio.Task[Any]:
        return self.meanwhile(self.bob, "/tasks/reply", {"taskId": task_id, "text": "done"})

    def cancel_meanwhile(self, task_id: str) -> asyncio.Task[Any]:
        return self.meanwhile(self.alice, "/tasks/cancel", {"taskId": task_id})

    async def drop(self, hold: Hold) -> None:
        """The held request is answered by nothing: its connection closes."""
        hold.release()
        await hold.until_closed()

    async def kill_at(self, hold: Hold, node: Daemon, call: asyncio.Task[Any]) -> None:
        """``node`` SIGKILLed once its request is held at ``hold``; the request dropped, and
        ``call`` (what sent it) ended with the daemon."""
        await hold.until_reached()
        await node.kill()
        await self.drop(hold)
        await ended(call)

    async def cancel_takes_effect(self, task_id: str) -> None:
        canceled = await self.alice.call("POST", "/tasks/cancel", {"taskId": task_id})
        assert canceled["status"]["state"] == CANCELED

    async def reply(self, task_id: str, *, refused_once_canceled: bool = False) -> None:
        """bob's reply: completes the task, or (``refused_once_canceled``) is refused when the
        cancel reached him first."""
        try:
            await self.bob.call("POST", "/tasks/reply", {"taskId": task_id, "text": "done"})
        except AnetError:
            if not refused_once_canceled:
                raise

    async def state(self, node: Daemon, task_id: str) -> str | None:
        task = await task_on(node.paths, task_id)
        return None if isinstance(task, str) else str(task["status"]["state"])

    async def restart_hub(self) -> None:
        self.hub.kill()
        await asyncio.to_thread(self.hub.start)
        for node in (self.alice, self.bob):
            await eventually(node.registered, f"{node.root.name} registered again", RECOVERY_S)

    async def outcome(self, task_id: str, *, paid: bool) -> None:
        await assert_one_outcome(self.hub.data, self.alice.paths, self.bob.paths, task_id,
                                 paid=paid, timeout=RECOVERY_S)


async def ended(call: asyncio.Task[Any]) -> None:
    """Wait until a call whose daemon was killed under it ended, however it did."""
    with contextlib.suppress(AnetError):
        await asyncio.wait_for(call, STEP_TIMEOUT_S)


@asynccontextmanager
async def race(root: Path) -> AsyncIterator[Race]:
    """The hub process; bob and alice as daemons, through the proxy; alice credited 1.00 USD
    and on bob's trust list."""
    hub = HubProcess(root / "hub", free_port())
    await asyncio.to_thread(hub.start)
    nodes: list[Daemon] = []
    try:
        async with RailProxy(hub.port) as proxy:
            for name, node, modules in (
                    ("bob", {"name": "bob", "skills": [{"id": SKILL, "name": "Summarize"}]},
                     {"x402": {"prices": PRICES}}),
                    ("alice", {"name": "alice"}, {"x402": TIERS})):
                settings = prepare(root / name, hub={"url": proxy.url}, node=node,
                                   modules=modules)
                nodes.append(Daemon(root / name, Identity.load(settings.paths.identity).aid))
            bob, alice = nodes
            for daemon in nodes:
                await daemon.up()
            await asyncio.to_thread(admin.credit, hub.data, alice.aid, "1.00", "USD")
            await bob.call("POST", "/tasks/trust/add", {"aid": alice.aid})
            yield Race(hub, proxy, alice, bob)
    finally:
        for daemon in nodes:
            await daemon.stop()
        hub.stop()


async def test_the_payer_killed_with_its_void_before_the_hub_is_paid_and_completes(
        tmp_path: Path) -> None:
    """alice SIGKILLed while her void is on its way and the hub has not seen it: the cancel
    never took effect (her client's call fails with her daemon); restarted, her task goes on,
    and the work's end settles it: completed with the receipt."""
    async with race(tmp_path) as net:
        task_id = await net.paid_in_bobs_inbox()
        hold = net.proxy.hold("void", Moment.UNSEEN)
        canceling = net.cancel_meanwhile(task_id)
        await net.kill_at(hold, net.alice, canceling)
        assert isinstance(canceling.exception(), AnetError)  # the client heard no answer
        await net.alice.up()
        assert await net.state(net.alice, task_id) not in TERMINAL
        await net.reply(task_id)
        await net.outcome(task_id, paid=True)


async def test_the_payer_killed_after_the_hub_voided_ends_the_task_canceled(
        tmp_path: Path) -> None:
    """alice SIGKILLed after the hub took her void, before she heard it: her cancel did not
    take effect at her node, but the rail's decision stands; bob's settle finds the void, he
    ends the task canceled, and alice's restarted node follows his update."""
    async with race(tmp_path) as net:
        task_id = await net.paid_in_bobs_inbox()
        hold = net.proxy.hold("void", Moment.ANSWERED)
        canceling = net.cancel_meanwhile(task_id)
        await net.kill_at(hold, net.alice, canceling)
        await net.alice.up()
        await net.reply(task_id)
        await net.outcome(task_id, paid=False)


async def test_the_payer_killed_just_after_its_cancel_stays_canceled(tmp_path: Path) -> None:
    """The cancel answered, then alice SIGKILLed at once: the canceled task is durable, and
    the work's end afterwards moves nothing."""
    async with race(tmp_path) as net:
        task_id = await net.paid_in_bobs_inbox()
        await net.cancel_takes_effect(task_id)
        await net.alice.kill()
        await net.alice.up()
        assert await net.state(net.alice, task_id) == CANCELED
        await net.reply(task_id, refused_once_canceled=True)
        await net.outcome(task_id, paid=False)


async def test_the_payee_frozen_through_the_cancel_then_killed_ends_canceled(
        tmp_path: Path) -> None:
    """bob SIGSTOPped with the paid task in his inbox; alice cancels (her void needs only the
    rail); bob SIGKILLed while frozen and restarted: whether or not the cancel reached him, his
    reply settles nothing and the task ends canceled on both nodes."""
    async with race(tmp_path) as net:
        task_id = await net.paid_in_bobs_inbox()
        net.bob.signal(signal.SIGSTOP)
        await net.cancel_takes_effect(task_id)
        await net.bob.kill()
        await net.bob.up()
        await net.reply(task_id, refused_once_canceled=True)
        await net.outcome(task_id, paid=False)


async def test_the_payee_killed_with_its_settle_before_the_hub_then_canceled(
        tmp_path: Path) -> None:
    """bob replied and SIGKILLed while his settle is on its way, unseen by the hub; alice
    cancels while he is down (the void wins); restarted, bob settles again, finds the void
    and ends the task canceled: nothing moved."""
    async with race(tmp_path) as net:
        task_id = await net.paid_in_bobs_inbox()
        hold = net.proxy.hold("settle", Moment.UNSEEN)
        replying = net.reply_meanwhile(task_id)
        await net.kill_at(hold, net.bob, replying)
        await net.cancel_takes_effect(task_id)
        await net.bob.up()
        await net.outcome(task_id, paid=False)


async def test_the_payee_killed_after_the_hub_settled_refuses_anet_cancel(
        tmp_path: Path) -> None:
    """bob SIGKILLed after the hub settled, before he heard it; ``anet cancel`` while he is
    down is refused (``payment-settled``, exit status 1, the error as JSON); restarted, bob
    recovers the settlement and the task completes with its receipt."""
    async with race(tmp_path) as net:
        task_id = await net.paid_in_bobs_inbox()
        hold = net.proxy.hold("settle", Moment.ANSWERED)
        replying = net.reply_meanwhile(task_id)
        await net.kill_at(hold, net.bob, replying)
        refused = await anet_async(net.alice.root, "cancel", task_id, "--json", check=False)
        assert refused.returncode == 1, refused
        error = json.loads(refused.stdout)
        assert error["error"] == "payment-settled", error
        assert "completes with its receipt" in error["message"]
        await net.bob.up()
        await net.outcome(task_id, paid=True)


async def test_the_hub_restarted_after_the_payment_verified_then_canceled(
        tmp_path: Path) -> None:
    """The hub SIGKILLed and restarted while the paid task is at work: its ledger kept the
    verified authorization; the cancel voids it at the restarted hub, and bob's reply
    settles nothing."""
    async with race(tmp_path) as net:
        task_id = await net.paid_in_bobs_inbox()
        await net.restart_hub()
        await net.cancel_takes_effect(task_id)
        await net.reply(task_id, refused_once_canceled=True)
        await net.outcome(task_id, paid=False)


async def test_the_hub_restarted_after_it_settled_refuses_the_cancel(tmp_path: Path) -> None:
    """The hub SIGKILLed after it settled, its answer lost, and restarted: the cancel finds
    the settlement (``payment-settled``) and the task goes on; bob's next attempt (held until
    the cancel was answered) recovers the settlement and the task completes with its receipt."""
    async with race(tmp_path) as net:
        task_id = await net.paid_in_bobs_inbox()
        hold = net.proxy.hold("settle", Moment.ANSWERED)
        replying = net.reply_meanwhile(task_id)
        await hold.until_reached()
        again = net.proxy.hold("settle", Moment.UNSEEN)
        net.hub.kill()
        await net.drop(hold)
        await net.restart_hub()
        await again.until_reached()
        with pytest.raises(AnetError) as refused:
            await net.alice.call("POST", "/tasks/cancel", {"taskId": task_id})
        assert refused.value.reason == "payment-settled"
        again.release(pass_on=True)
        await asyncio.wait_for(replying, STEP_TIMEOUT_S)
        await net.outcome(task_id, paid=True)
