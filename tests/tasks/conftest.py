"""Nodes with real identities, stores, evidence chains and task layers, joined by an in-process
relay that behaves as the HubLink contract says (stores envelopes, delivers them in order,
acknowledges when the receiver returns, keeps them when it raises or the node is offline)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from anet_core.config import read_raw, write_config
from anet_core.datadir import initialise
from anet_core.identity import Identity, VerifiedHistory
from anet_core.link import (
    EnvelopeReceiver,
    HubError,
    JoinState,
    JoinStatus,
    KeyState,
    PeerInfo,
    SearchPage,
    SearchQuery,
    Verification,
)
from anet_core.node import Node
from anet_core.plugins import make_plugins
from anet_core.settings import Settings


@dataclass(frozen=True)
class FakePeer(PeerInfo):
    history: VerifiedHistory | None = None


@dataclass
class FakeHub:
    """The relay: ``online`` nodes get envelopes at once, the others when they return."""

    identities: dict[str, Identity] = field(default_factory=dict)
    receivers: dict[str, EnvelopeReceiver] = field(default_factory=dict)
    queues: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    seen: list[dict[str, Any]] = field(default_factory=list)
    up: bool = True
    refuse: str | None = None
    _pumps: dict[str, asyncio.Event] = field(default_factory=dict)

    def link(self, identity: Identity) -> FakeLink:
        self.identities[identity.aid] = identity
        self.queues.setdefault(identity.aid, [])
        return FakeLink(self, identity.aid)

    def peer(self, aid: str) -> FakePeer:
        identity = self.identities.get(aid)
        if identity is None:
            raise HubError("unknown-agent", f"no agent {aid}")
        return FakePeer(aid=aid, verification=Verification.VERIFIED, key_state=KeyState.FRESH,
                        encryption_key=identity.encryption_public_key,
                        key_seq=identity.key_seq, history=identity.verified_history)

    def accept(self, envelope: dict[str, Any]) -> None:
        if not self.up:
            raise HubError("unreachable", "the hub is down")
        if self.refuse:
            raise HubError(self.refuse, "refused by the test")
        self.seen.append(envelope)
        self.queues.setdefault(envelope["to"], []).append(envelope)
        self.wake(envelope["to"])

    def wake(self, aid: str) -> None:
        self._pumps.setdefault(aid, asyncio.Event()).set()

    async def pump(self, aid: str) -> None:
        """Deliver queued envelopes in order; a receiver that raises gets it again later."""
        event = self._pumps.setdefault(aid, asyncio.Event())
        event.set()
        while True:
            await event.wait()
            event.clear()
            while self.up and aid in self.receivers and self.queues[aid]:
                try:
                    await self.receivers[aid](self.queues[aid][0])
                except HubError:
                    await asyncio.sleep(0.05)
                    event.set()
                    break
                self.queues[aid].pop(0)


@dataclass
class FakeLink:
    hub: FakeHub
    aid: str
    registered: bool = True

    @property
    def status(self) -> JoinStatus:
        if not self.registered:
            return JoinStatus(JoinState.NOT_JOINED, None, None,
                              "This node has not joined a hub yet; run `anet join <hub-url>`.")
        if not self.hub.up:
            return JoinStatus(JoinState.UNREACHABLE, "ws://fake", 0.0, "The hub is unreachable.")
        return JoinStatus(JoinState.REGISTERED, "ws://fake", 0.0, "Registered at ws://fake.")

    async def send(self, envelope: dict[str, Any]) -> None:
        self.hub.accept(envelope)

    def set_receiver(self, receiver: EnvelopeReceiver) -> None:
        self.hub.receivers[self.aid] = receiver
        self.hub.wake(self.aid)

    async def peer(self, aid: str) -> PeerInfo:
        if not self.hub.up:
            raise HubError("unreachable", "the hub is down")
        return self.hub.peer(aid)

    async def search(self, query: SearchQuery) -> SearchPage:
        return SearchPage(peers=[self.hub.peer(aid) for aid in self.hub.identities])

    def forget_peer(self, aid: str | None = None) -> None:
        return None  # nothing is cached: every peer() asks the fake hub

    async def refresh_card(self) -> None:
        return None

    async def reregister(self) -> None:
        return None

    async def rejoin(self, url: str | None) -> JoinStatus:
        self.registered = url is not None
        return self.status

    async def post_review(self, review: dict[str, Any]) -> None:
        return None


@asynccontextmanager
async def running_node(root: Path, hub: FakeHub, *, no_response_after: str = "15m",
                       plugins: Any = None) -> AsyncIterator[Node]:
    """A node over ``root`` (created the first time, reopened after), linked to ``hub``."""
    settings = Settings(data_dir=root)
    initialise(settings.paths)
    raw = read_raw(settings.paths.config)
    raw["node"] = {**raw.get("node", {}), "no_response_after": no_response_after}
    write_config(settings.paths.config, raw)
    link = hub.link(Identity.load(settings.paths.identity))
    pump = asyncio.create_task(hub.pump(link.aid))
    try:
        async with Node.open(settings, plugins=plugins or make_plugins(load_entry_points=False),
                             hub=link) as node:
            node.tasks.receive()
            yield node
    finally:
        hub.receivers.pop(link.aid, None)
        pump.cancel()


@pytest.fixture
def hub() -> FakeHub:
    return FakeHub()


async def eventually(predicate: Callable[[], Any], timeout: float = 5.0) -> Any:
    """Wait until ``predicate()`` is truthy; fail the test after ``timeout`` seconds."""
    deadline = asyncio.get_running_loop().time() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if asyncio.get_running_loop().time() > deadline:
            raise AssertionError(f"timed out waiting for {predicate}")
        await asyncio.sleep(0.01)


def text(value: str, message_id: str = "m-1", **ids: str) -> dict[str, Any]:
    return {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": value}], **ids}
