"""Relay of sealed envelopes: admission (shape, sender, recipient, size), storage and routing.

An envelope for a node connected to this instance is forwarded at once and not stored: its
sender hears ``accepted`` when the recipient acknowledged it (``anet_hub.delivery``). Any other
envelope (recipient offline, slow, or behind; at another instance; from a federated hub) is
stored before the sender hears ``accepted`` and stays stored until the recipient acknowledges
it. Either way a hub crash loses nothing a sender was told accepted: what it had not stored, the
recipient had already acknowledged, or the sender never heard of and sends again (the recipient
dedupes by envelope id). docs/performance.md ("The hub's relay") has the whole argument.

In a cluster (docs/hub.md "Cluster"), the recipient may be connected to another instance of the
hub: a :class:`Router` (``anet_hub.cluster``) tells that instance, which feeds its connection
the same way; rate limits are then kept in shared storage (:class:`SharedBuckets`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from aiohttp import web

from anet_core.api import TokenBucket
from anet_core.protocol.envelope import (
    DEFAULT_MAX_AGE_S,
    EnvelopeError,
    check_envelope,
    envelope_text,
)
from anet_core.protocol.frames import Refusal
from anet_hub.delivery import Connection, LiveEnvelope, accepted_frame
from anet_hub.metrics import HubMetrics
from anet_hub.storage import AgentState, HubStorage, QueuedEnvelope, StorageError

log = logging.getLogger(__name__)

MAX_QUEUE_TTL_S = DEFAULT_MAX_AGE_S
"""Recipients refuse envelopes older than this (anet_core.protocol.envelope), so keeping them longer
would only waste the disk."""


class Router(Protocol):
    """Reaches the instances of the hub that hold connections this instance does not."""

    async def attached(self, conn: Connection) -> None:
        """``conn`` is live here: route its envelopes to this instance from now on."""

    async def detached(self, conn: Connection) -> None: ...

    async def route(self, item: QueuedEnvelope) -> None:
        """Tell the instance holding ``item.recipient``, if any; the envelope is stored."""

    async def online_elsewhere(self, aids: list[str]) -> set[str]:
        """Those of ``aids`` connected to another instance of the hub."""


class Federation(Protocol):
    """The hubs this hub forwards to (``anet_hub.federation``)."""

    async def forward(self, recipient: str, envelope: dict[str, object]) -> str:
        """Hand the envelope to ``recipient``'s home hub; its id once stored there. Raises
        :class:`Refusal` (``not-federated``, ``unknown-recipient``, ``peer-hub-unreachable``)."""


@runtime_checkable
class SharedBuckets(Protocol):
    """Token buckets every instance of the hub charges (``anet_hub.postgres``)."""

    async def take_token(self, aid: str, rate: float, burst: int) -> float:
        """0 when a token was taken, else the seconds until one is available."""

    async def forget_full_buckets(self, rate: float, burst: int) -> int: ...


@dataclass(frozen=True)
class RelayLimits:
    max_envelope_bytes: int
    rate_per_second: float
    burst: int
    queue_ttl_s: float


@dataclass
class Relay:
    storage: HubStorage
    limits: RelayLimits
    metrics: HubMetrics = field(default_factory=HubMetrics)
    router: Router | None = None
    federation: Federation | None = None
    shared_buckets: SharedBuckets | None = None
    connections: dict[str, Connection] = field(default_factory=dict)
    _buckets: dict[str, TokenBucket] = field(default_factory=dict)
    _spills: set[asyncio.Task[None]] = field(default_factory=set)
    _registered: set[str] = field(default_factory=set)
    """Recipients known to be registered; registration is never withdrawn, so this only grows
    and saves a storage read per envelope."""

    def online(self, aid: str) -> bool:
        """Connected to this instance."""
        return aid in self.connections

    async def online_among(self, aids: list[str]) -> set[str]:
        """Those of ``aids`` connected to this hub: here, or at another instance."""
        here = {aid for aid in aids if aid in self.connections}
        elsewhere = [aid for aid in aids if aid not in here]
        if elsewhere and self.router is not None:
            here |= await self.router.online_elsewhere(elsewhere)
        return here

    async def attach(self, conn: Connection) -> Connection | None:
        """Make ``conn`` the node's connection; returns the one it replaces here, if any (the
        router closes one at another instance)."""
        previous = self.connections.get(conn.aid)
        self.connections[conn.aid] = conn
        self._registered.add(conn.aid)
        if self.router is not None:
            await self.router.attached(conn)
        return previous

    async def detach(self, conn: Connection) -> None:
        """``conn`` ended: what it had live is stored (and its senders told ``accepted``)."""
        conn.close()
        self._spill(conn)
        if self.connections.get(conn.aid) is conn:
            del self.connections[conn.aid]
            if self.router is not None:
                await self.router.detached(conn)

    async def drain(self) -> None:
        """Wait until the live envelopes of closed connections are stored (at shutdown)."""
        while self._spills:
            await asyncio.gather(*self._spills, return_exceptions=True)

    async def admit_request(self, aid: str) -> None:
        """Charge one request to the node's token bucket (kept per AID, so reconnecting does not
        refill it; in shared storage in a cluster, so another instance does not either); raises
        ``rate-limited`` naming the limit."""
        limits = self.limits
        if self.shared_buckets is not None:
            wait = await self.shared_buckets.take_token(aid, limits.rate_per_second,
                                                        limits.burst)
        else:
            wait = self._take_local_token(aid)
        if wait:
            raise Refusal("rate-limited",
                          f"more than {limits.rate_per_second:g} requests/s (burst "
                          f"{limits.burst}) from {aid}; retry after {wait:.2f} s",
                          retry_after=round(wait, 3))

    def _take_local_token(self, aid: str) -> float:
        now = time.monotonic()
        limits = self.limits
        bucket = self._buckets.get(aid)
        if bucket is None:
            bucket = self._buckets[aid] = TokenBucket(limits.rate_per_second, limits.burst,
                                                      now=now)
        return bucket.take(now)

    async def forget_idle_buckets(self) -> None:
        """Drop buckets that have refilled: they hold no state a fresh one would not."""
        if self.shared_buckets is not None:
            await self.shared_buckets.forget_full_buckets(self.limits.rate_per_second,
                                                          self.limits.burst)
            return
        now = time.monotonic()
        full = [aid for aid, bucket in self._buckets.items() if bucket.is_full(now)]
        for aid in full:
            del self._buckets[aid]

    def connection(self, aid: str, ws: web.WebSocketResponse,
                   transport: asyncio.Transport | None) -> Connection:
        """A new connection for the registered node ``aid`` (attach it with :meth:`attach`)."""
        return Connection(aid, ws, transport, self.storage, spill=self._spill)

    async def submit(self, sender: str, envelope: dict[str, object], frame_bytes: int, *,
                     rid: str, reply_to: Connection | None = None,
                     via_hub: str | None = None) -> str | None:
        """Admit one envelope and forward or store it. Raises :class:`Refusal`.

        Returns its id when it is accepted now (stored, or stored at a federated hub); None when
        it went to its recipient live, and ``reply_to`` (the sender's connection) is told
        ``accepted`` for ``rid`` later. ``via_hub`` names the federated hub that forwarded it
        for one of its agents: then the sender is that hub's agent, and the recipient must be
        homed here (no second hop). An envelope from a local node for an agent homed at a
        federated hub is handed to that hub (``federation``) and accepted once stored there."""
        limit = self.limits.max_envelope_bytes
        if frame_bytes > limit:
            raise Refusal("envelope-too-large",
                          f"the envelope is {frame_bytes} bytes; this hub accepts at most {limit} "
                          "bytes per envelope (hub option --max-envelope-bytes)")
        try:
            header = check_envelope(envelope)
        except EnvelopeError as error:
            log.warning("event=refused reason=malformed-envelope from=%s detail=%r", sender,
                        str(error))
            raise Refusal("malformed-envelope", str(error)) from None
        if via_hub is None and header.sender != sender:
            log.warning("event=refused reason=wrong-sender from=%s claimed=%s id=%s", sender,
                        header.sender, header.id)
            raise Refusal("wrong-sender", f"the envelope says it is from {header.sender}, but "
                                          f"this connection is registered as {sender}")
        recipient = header.recipient
        if not await self._is_registered(recipient):
            if via_hub is None and self.federation is not None:
                return await self.federation.forward(recipient, envelope)
            raise Refusal("unknown-recipient", f"{recipient} is not registered at this "
                                               "hub; look the agent up at its home hub")
        sender = header.sender
        text = envelope_text(envelope)
        now = time.time()
        conn = self.connections.get(recipient)
        if conn is not None and reply_to is not None and await conn.forward(LiveEnvelope(
                id=header.id, sender=sender, recipient=recipient, text=text, received_at=now,
                rid=rid, reply_to=reply_to)):
            return None
        if conn is not None and conn.spilling is not None:
            await conn.spilling  # what waited live is stored first: the queue keeps the order
        item = await self._store(header.id, sender, recipient, text, now)
        conn = self.connections.get(recipient)
        if conn is not None:
            conn.push(item)
        elif self.router is not None:
            await self.router.route(item)
        return header.id

    async def _store(self, envelope_id: str, sender: str, recipient: str, text: str,
                     now: float) -> QueuedEnvelope:
        ttl = self.limits.queue_ttl_s
        try:
            seq = await self.storage.enqueue(id=envelope_id, sender=sender, recipient=recipient,
                                             text=text, now=now, ttl=ttl)
        except StorageError as error:
            log.error("event=store-failed reason=%s from=%s to=%s id=%s", error.reason, sender,
                      recipient, envelope_id)
            raise Refusal(error.reason, f"{error.message}; the envelope was not stored, "
                                        "send it again later") from None
        log.debug("event=accepted from=%s to=%s id=%s bytes=%d", sender, recipient, envelope_id,
                  len(text))
        self.metrics.relayed.inc()
        return QueuedEnvelope(seq=seq, id=envelope_id, sender=sender, recipient=recipient,
                              text=text, stored_at=now, expires_at=now + ttl)

    def _spill(self, conn: Connection) -> None:
        """Store ``conn``'s live envelopes now (it is slow, holds too many, or closed)."""
        items = conn.take_live()
        if not items:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        for item in items:
            item.storing = done
        conn.spilling = done
        task = asyncio.create_task(self._store_live(conn, items, done))
        self._spills.add(task)
        task.add_done_callback(self._spills.discard)

    async def _store_live(self, conn: Connection, items: list[LiveEnvelope],
                          done: asyncio.Future[None]) -> None:
        try:
            for item in items:
                try:
                    queued = await self._store(item.id, item.sender, item.recipient, item.text,
                                               item.received_at)
                except Refusal as refusal:
                    # Not stored, so not accepted: the sender sends it again later.
                    await item.reply_to.answer(refusal.frame(item.rid).dump())
                    continue
                await item.reply_to.answer(accepted_frame(item.rid, item.id))
                if conn.closed:
                    # Its recipient went away: feed the connection that replaced it, if any.
                    now_conn = self.connections.get(item.recipient)
                    if now_conn is not None and now_conn is not conn:
                        now_conn.push(queued)
                    elif now_conn is None and self.router is not None:
                        await self.router.route(queued)
        finally:
            conn.stored(items)
            if conn.spilling is done:
                conn.spilling = None
            done.set_result(None)

    async def ack(self, conn: Connection, envelope_id: str) -> None:
        received_at, live = conn.acked(envelope_id)
        if received_at is not None:
            self.metrics.latency.observe(max(0.0, time.time() - received_at))
        if live is not None:
            if live.storing is None:
                # The recipient has it: the sender may forget it, and the hub never stored it.
                await live.reply_to.answer(accepted_frame(live.rid, live.id))
                self.metrics.relayed.inc()
                self.metrics.delivered.inc()
                return
            await live.storing  # being stored: remove it once it is there
        try:
            removed = await self.storage.remove(conn.aid, envelope_id)
        except StorageError as error:
            # Not removed: it is delivered again on the next connection, and deduped there.
            log.error("event=ack-failed reason=%s aid=%s id=%s", error.reason, conn.aid,
                      envelope_id)
            return
        if removed:
            self.metrics.delivered.inc()

    async def _is_registered(self, aid: str) -> bool:
        if aid in self._registered:
            return True
        record = await self.storage.get_agent(aid)
        if record is not None and record.state is AgentState.REGISTERED:
            self._registered.add(aid)
            return True
        return False
