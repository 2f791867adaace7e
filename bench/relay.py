"""The hub's relay rate: envelopes from one node to another, delivered and acknowledged.

Two real hub clients (in this process) on one ``anet hub serve``; the sender sends N sealed
envelopes of about 0.6 KiB with ``in_flight`` sends outstanding (each waits for the hub's
``accepted``); the receiver takes each one, and its client acknowledges it to the hub once the
receiver returned (``ACK_AFTER_TURNS`` later), as a node does. The rate is N over the time
until the receiver took the last one. Used by ``bench/run.py`` and ``bench/hub_connections.py``.

``node_loop_relay_rate`` runs the two clients on the event loop a node's daemon runs on (uvloop
when the ``fast`` extra installed it, as ``make bench`` does; ``ANET_LOOP`` as for a node), in a
thread of its own: a node's link is measured as a node runs it.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anet_core.event_loop import run_node_event_loop
from anet_core.identity import Identity
from anet_core.link import JoinState
from anet_core.link.client import HubClient
from anet_core.protocol.envelope import seal
from anet_core.settings import Settings
from anet_core.util.canonical import compact_json

PAYLOAD = "x" * 200
TIMEOUT_S = 120.0


@dataclass
class Pair:
    """A sending and a receiving node, registered at the same hub."""

    sender: HubClient
    sender_identity: Identity
    receiver: HubClient
    receiver_identity: Identity


async def until(check: Callable[[], bool], what: str, timeout: float = TIMEOUT_S) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        await asyncio.sleep(0.01)


@asynccontextmanager
async def two_nodes(url: str, work: Path) -> AsyncIterator[Pair]:
    """Two fresh identities under ``work``, connected and registered at the hub at ``url``."""
    identities = [Identity.create(work / name / "identity") for name in ("sender", "receiver")]
    clients = [HubClient(identity, url=url, pin_path=work / name / "pin.json")
               for identity, name in zip(identities, ("sender", "receiver"), strict=True)]
    try:
        await asyncio.gather(*(client.start() for client in clients))
        await until(lambda: all(c.status.state is JoinState.REGISTERED for c in clients),
                    "the two nodes to register")
        yield Pair(clients[0], identities[0], clients[1], identities[1])
    finally:
        await asyncio.gather(*(client.close() for client in clients))


async def relay_rate(pair: Pair, count: int, in_flight: int = 32) -> float:
    """Envelopes/s from the sender to the receiver, ``count`` of them, ``in_flight`` at once."""
    received = 0

    async def receive(envelope: dict[str, Any]) -> None:
        nonlocal received
        received += 1

    pair.receiver.set_receiver(receive)
    recipient = pair.receiver_identity
    # Each as a node's outbox hands it to the link: the JSON text kept when it was sealed.
    queue = [compact_json(seal(pair.sender_identity, recipient.aid,
                               recipient.encryption_public_key, {"n": index, "text": PAYLOAD}))
             for index in range(count)]

    async def pump() -> None:
        while queue:
            await pair.sender.send(queue.pop())

    started = time.perf_counter()
    await asyncio.gather(*(pump() for _ in range(in_flight)))
    await until(lambda: received >= count, f"{count} envelopes to arrive")
    return count / (time.perf_counter() - started)


def node_loop_relay_rate(url: str, work: Path, count: int, in_flight: int) -> float:
    """:func:`relay_rate` of two fresh nodes under ``work`` at the hub at ``url``, on the loop
    ``ANET_LOOP`` chooses for a node; blocks, so call it in a thread of its own."""
    async def measure() -> float:
        async with two_nodes(url, work) as pair:
            return await relay_rate(pair, count, in_flight)

    return run_node_event_loop(measure, Settings().loop)
