"""The hub SIGKILLed at the worst moments of forwarding (docs/performance.md, "The hub's relay"):
a real ``anet hub serve`` process, real nodes running their task layers in this process.

The hub forwards an envelope for a connected node without storing it and tells the sender
``accepted`` only once the recipient acknowledged it; it stores an envelope only when the
recipient is slow. Each test kills the hub where that could lose or double something, restarts
it on the same data, and counts: every task completes, the provider serves each once, and every
envelope that reached a node's task layer more than once was refused there as a replay."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager, closing
from pathlib import Path
from typing import Any

import pytest

from anet_core.link.contract import JoinState
from anet_core.node import Node
from anet_hub.delivery import STORE_AFTER_S
from tests.hub.network import RECOVERY_S, Provider, all_completed, send_tasks, start_node
from tests.support.processes import HubProcess, free_port
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(240)

INBOUND_LOGGER = "anet_core.tasks.inbound"


class Counted:
    """A node's task layer behind a receiver that counts each envelope id handed to it and can
    act (kill the hub) after the task layer kept an envelope, before its ack leaves."""

    def __init__(self, node: Node) -> None:
        self.node = node
        self.received: Counter[str] = Counter()
        self.after_kept: Callable[[dict[str, Any]], None] | None = None
        self.before: Callable[[dict[str, Any]], Awaitable[None]] | None = None
        node.hub.set_receiver(self)

    async def __call__(self, envelope: dict[str, Any]) -> None:
        if self.before is not None:
            await self.before(envelope)
        await self.node.tasks.inbound(envelope)
        self.received[envelope["id"]] += 1
        if self.after_kept is not None:
            self.after_kept(envelope)


def replays(caplog: pytest.LogCaptureFixture) -> Counter[str]:
    """Envelope ids a task layer refused as replays (logged ``reason=replayed``)."""
    found: Counter[str] = Counter()
    for record in caplog.records:
        if record.name == INBOUND_LOGGER and "reason=replayed" in record.getMessage():
            found[record.getMessage().split("id=")[1].split()[0]] += 1
    return found


def check_once(nodes: list[Counted], caplog: pytest.LogCaptureFixture) -> int:
    """Every envelope a task layer got more than once was refused as a replay each extra time;
    returns how many envelopes came again."""
    refused = replays(caplog)
    again = 0
    for counted in nodes:
        for envelope_id, times in counted.received.items():
            if times > 1:
                again += 1
                assert refused[envelope_id] >= times - 1, \
                    f"{envelope_id} reached {counted.node.identity.aid}'s task layer {times} " \
                    f"times and was refused as a replay {refused[envelope_id]} times"
    return again


def stored_ids(hub: HubProcess) -> set[str]:
    """The envelope ids in the hub's queue, read from its SQLite file."""
    with closing(sqlite3.connect(f"file:{hub.data / 'hub.db'}?mode=ro", uri=True)) as db:
        return {row[0] for row in db.execute("SELECT id FROM envelopes")}


@asynccontextmanager
async def network(tmp_path: Path,
                  provider: Provider) -> AsyncIterator[tuple[HubProcess, Counted, Counted]]:
    """A hub process, and alice and bob (serving through ``provider``) registered there."""
    hub = HubProcess(tmp_path / "hub" / "data", free_port()).start()
    try:
        async with AsyncExitStack() as stack:
            bob = Counted(await start_node(stack, tmp_path / "bob", hub.url, provider))
            alice = Counted(await start_node(stack, tmp_path / "alice", hub.url))
            yield hub, alice, bob
    finally:
        hub.stop()


async def restart(hub: HubProcess) -> None:
    await asyncio.to_thread(hub.start)


async def registered(*nodes: Node) -> None:
    for node in nodes:
        await eventually(lambda node=node: node.hub.status.state is JoinState.REGISTERED,
                         "the node registered at the restarted hub", RECOVERY_S)


async def test_hub_killed_holding_envelopes_it_forwarded_unstored(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """Killed twice while tasks flow, each time holding an envelope it had not stored: once
    right after the recipient's task layer committed it, before the acknowledgement left (so
    its sender was never told ``accepted``); once after forwarding it, before the recipient
    kept it."""
    caplog.set_level(logging.INFO, logger=INBOUND_LOGGER)
    provider = Provider()
    async with network(tmp_path, provider) as (hub, alice, bob):
        killed = asyncio.Event()
        kill_at: list[tuple[int, bool]] = []
        """When to kill: at bob's n-th envelope; before his task layer keeps it, or after."""
        gate = asyncio.Event()  # bob takes nothing while alice queues the tasks

        def kill(kept: bool) -> None:
            if kill_at and kill_at[0] == (sum(bob.received.values()) + (not kept), kept):
                kill_at.pop()
                hub.kill()
                killed.set()

        async def before(envelope: dict[str, Any]) -> None:
            await gate.wait()
            kill(kept=False)  # forwarded to bob, not kept by him: alice heard nothing

        bob.before, bob.after_kept = before, lambda envelope: kill(kept=True)
        ids: list[str] = []
        for count, n, kept in ((5, 3, True), (20, 8, False)):
            # Queued at alice first (her outbox sends them in order, each once the previous
            # was accepted, and bob's updates come back meanwhile); bob takes them then,
            # and the hub dies at his n-th.
            await registered(alice.node, bob.node)
            gate.clear()
            sent = await send_tasks(alice.node, bob.node, count, f"batch of {count}")
            kill_at.append((sum(bob.received.values()) + n, kept))
            gate.set()
            await asyncio.wait_for(killed.wait(), RECOVERY_S)
            killed.clear()
            await restart(hub)
            ids += sent
            await all_completed(alice.node, ids)

        assert sorted(provider.served) == sorted(ids)
        assert set(provider.served.values()) == {1}, provider.served
        # The envelope whose ack was lost came again, and was refused as a replay.
        assert check_once([alice, bob], caplog) >= 1


async def test_hub_killed_with_envelopes_it_stored_for_a_slow_recipient(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """The recipient takes longer than STORE_AFTER_S over one envelope: the hub stores what
    waits for it and tells the sender ``accepted``; the hub is killed then, before the recipient
    acknowledged, and restarted: the stored envelopes come from its storage, once each."""
    caplog.set_level(logging.INFO, logger=INBOUND_LOGGER)
    provider = Provider()
    async with network(tmp_path, provider) as (hub, alice, bob):
        ids = await send_tasks(alice.node, bob.node, 2, "warm-up")
        await all_completed(alice.node, ids)

        stalled: list[str] = []
        release = asyncio.Event()

        async def stall_once(envelope: dict[str, Any]) -> None:
            if not stalled:
                stalled.append(envelope["id"])
                await release.wait()

        bob.before = stall_once
        ids += await send_tasks(alice.node, bob.node, 1, "slow")
        await eventually(lambda: stalled, "bob stalls on the message")
        await eventually(lambda: stalled[0] in stored_ids(hub),
                         f"the hub stores it after {STORE_AFTER_S:g} s without an ack",
                         RECOVERY_S)
        hub.kill()
        release.set()  # bob keeps it now; his ack has no hub to go to
        await restart(hub)
        await registered(alice.node, bob.node)
        ids += await send_tasks(alice.node, bob.node, 3, "after")
        await all_completed(alice.node, ids)

        assert sorted(provider.served) == sorted(ids)
        assert set(provider.served.values()) == {1}, provider.served
        await eventually(lambda: not stored_ids(hub), "the hub's queue is empty again")
        # Kept by bob when the hub was gone (or, if his task layer needed the hub for it,
        # not yet), then delivered from the restarted hub's storage: once more at most.
        assert bob.received[stalled[0]] >= 1
        check_once([alice, bob], caplog)
