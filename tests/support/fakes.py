"""An in-process relay for real nodes (``FakeHub``, a link per node: ``FakeLink``) that behaves as
the ``HubLink`` contract says: it stores envelopes, delivers them in order, acknowledges when the
receiver returned and its flush did, and keeps them when either raises or the node is offline.
Nodes use it through ``tests.support.nodes.open_node``."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from anet_core import hookimpl
from anet_core.identity import Identity, VerifiedHistory
from anet_core.link import (
    AckTiming,
    EnvelopeReceiver,
    Flush,
    HubError,
    JoinState,
    JoinStatus,
    KeyState,
    PeerInfo,
    SearchPage,
    SearchQuery,
    Verification,
)
from anet_core.records import InboundTask, TaskClaim
from anet_core.tasks import Responder


@dataclass(frozen=True)
class FakePeer(PeerInfo):
    history: VerifiedHistory | None = None


@dataclass
class FakeHub:
    """The relay: ``online`` nodes get envelopes at once, the others when they return."""

    identities: dict[str, Identity] = field(default_factory=dict)
    receivers: dict[str, EnvelopeReceiver] = field(default_factory=dict)
    flushes: dict[str, Flush] = field(default_factory=dict)
    queues: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    seen: list[dict[str, Any]] = field(default_factory=list)
    timings: dict[str, AckTiming | None] = field(default_factory=dict)
    """Envelope id → when its receiver let its acknowledgement go (``EnvelopeReceiver``)."""
    up: bool = True
    refuse: str | None = None
    cards: dict[str, dict[str, Any]] = field(default_factory=dict)
    """AID → the network card the directory gives for it (verified); none when absent."""
    _pumps: dict[str, asyncio.Event] = field(default_factory=dict)

    def link(self, identity: Identity) -> FakeLink:
        self.identities[identity.aid] = identity
        self.queues.setdefault(identity.aid, [])
        return FakeLink(self, identity.aid)

    @asynccontextmanager
    async def connected(self, identity: Identity) -> AsyncIterator[FakeLink]:
        """The link of the node ``identity``, delivering to it while the context is open."""
        link = self.link(identity)
        pump = asyncio.create_task(self.pump(identity.aid))
        try:
            yield link
        finally:
            self.receivers.pop(identity.aid, None)
            pump.cancel()

    def peer(self, aid: str) -> FakePeer:
        identity = self.identities.get(aid)
        if identity is None:
            raise HubError("unknown-agent", f"no agent {aid}")
        return FakePeer(aid=aid, verification=Verification.VERIFIED, key_state=KeyState.FRESH,
                        card=self.cards.get(aid), encryption_key=identity.encryption_public_key,
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
                    envelope = self.queues[aid][0]
                    self.timings[envelope["id"]] = await self.receivers[aid](envelope)
                    await self.flushes.get(aid, _nothing)(0.0)
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

    async def send(self, envelope: dict[str, Any] | str) -> None:
        self.hub.accept(json.loads(envelope) if isinstance(envelope, str) else envelope)

    def set_receiver(self, receiver: EnvelopeReceiver, *, flush: Flush | None = None) -> None:
        self.hub.receivers[self.aid] = receiver
        if flush is not None:
            self.hub.flushes[self.aid] = flush
        self.hub.wake(self.aid)

    async def peer(self, aid: str) -> PeerInfo:
        if not self.hub.up:
            raise HubError("unreachable", "the hub is down")
        return self.hub.peer(aid)

    def cached_peer(self, aid: str) -> PeerInfo | None:
        return None  # nothing is cached: every peer() asks the fake hub

    async def search(self, query: SearchQuery) -> SearchPage:
        return SearchPage(peers=[self.hub.peer(aid) for aid in self.hub.identities])

    def forget_peer(self, aid: str | None = None) -> None:
        return None  # nothing is cached: every peer() asks the fake hub

    async def refresh_card(self) -> None:
        return None

    async def reregister(self) -> None:
        return None

    async def rejoin(self, url: str | None, instances: Sequence[str] = ()) -> JoinStatus:
        self.registered = url is not None
        return self.status

    async def post_review(self, review: dict[str, Any]) -> None:
        return None


class CompletingModule:
    """A module that claims every task and completes it at once with ``reply`` and one text
    artifact ``artifact`` (register it with ``tests.support.nodes.plugins_with``)."""

    def __init__(self, reply: str = "done", artifact: str = "the result") -> None:
        self.reply = reply
        self.artifact = artifact

    @hookimpl
    def anet_take_task(self, node: Any, task: InboundTask) -> TaskClaim:
        async def serve(task: InboundTask, responder: Responder) -> None:
            await responder.complete(self.reply, artifacts=[
                {"artifactId": "result", "parts": [{"text": self.artifact}]}])

        return TaskClaim(module="completes", serve=serve)


async def _nothing(within: float) -> None:
    """A receiver without a flush of its own."""
