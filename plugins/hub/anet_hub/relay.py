"""Relay of sealed envelopes: admission (shape, sender, recipient, size), queues and delivery.

Every accepted envelope is stored before the sender hears ``accepted`` and stays stored until
the recipient acknowledges it, whether the recipient is online or not: one path for both, and a
hub crash between the two loses nothing (the recipient may see an envelope twice; it dedupes by
envelope id). A connected recipient is fed from memory while it keeps up, and from storage when
it connects or falls behind.

In a cluster (docs/hub.md "Cluster"), the recipient may be connected to another instance of the
hub: a :class:`Router` (``anet_hub.cluster``) tells that instance, which feeds its connection
the same way; rate limits are then kept in shared storage (:class:`SharedBuckets`).
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections import deque
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from aiohttp import web

from anet_core.api import TokenBucket
from anet_core.protocol.envelope import DEFAULT_MAX_AGE_S, EnvelopeError, peek_header
from anet_core.protocol.frames import Refusal
from anet_hub.metrics import HubMetrics
from anet_hub.storage import AgentState, HubStorage, QueuedEnvelope, StorageError

log = logging.getLogger(__name__)

DELIVERY_WINDOW = 256
"""Envelopes sent to a node and not yet acknowledged; beyond it the hub waits for acks."""
OUTBOX_LIMIT = 1024
"""Envelopes held in memory for a connected node; past it the node is fed from storage."""
SCAN_BATCH = 128
SCAN_RETRY_S = 1.0
"""A queue read that failed (storage unreachable) is tried again this long after."""
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


class Connection:
    """A registered node's WebSocket, seen from the relay: what was sent, what waits."""

    def __init__(self, aid: str, ws: web.WebSocketResponse, storage: HubStorage) -> None:
        self.aid = aid
        self.ws = ws
        self.since = time.time()
        self._storage = storage
        self._inflight: dict[str, float] = {}
        """Envelope id → when the hub stored it (the relay latency is measured at the ack)."""
        self._outbox: deque[QueuedEnvelope] = deque()
        self._rescan = True  # a new connection first drains what was queued while it was away
        self._wake = asyncio.Event()
        self._acked = asyncio.Event()

    def push(self, item: QueuedEnvelope) -> None:
        if len(self._outbox) >= OUTBOX_LIMIT:
            # The node is slower than its senders: drop the memory copy, storage has them all.
            self._outbox.clear()
            self._rescan = True
        else:
            self._outbox.append(item)
        self._wake.set()

    def rescan(self) -> None:
        """Read the node's queue from storage again (an envelope may be there that no one
        pushed: a notification between instances was lost)."""
        self._rescan = True
        self._wake.set()

    def acked(self, envelope_id: str) -> float | None:
        """When the acknowledged envelope was stored, if it was sent on this connection."""
        stored_at = self._inflight.pop(envelope_id, None)
        self._acked.set()
        return stored_at

    async def deliver_forever(self) -> None:
        while True:
            if self._rescan:
                self._rescan = False
                try:
                    await self._scan()
                except StorageError as error:
                    log.error("event=queue-read-failed aid=%s reason=%s", self.aid, error.reason)
                    self._rescan = True
                    await asyncio.sleep(SCAN_RETRY_S)
            elif self._outbox:
                await self._send(self._outbox.popleft())
            else:
                self._wake.clear()
                await self._wake.wait()

    async def _scan(self) -> None:
        after = 0
        while True:
            batch = await self._storage.pending(self.aid, after_seq=after, limit=SCAN_BATCH,
                                                now=time.time())
            for item in batch:
                after = item.seq
                await self._send(item)
            if len(batch) < SCAN_BATCH:
                return

    async def _send(self, item: QueuedEnvelope) -> None:
        # Skipping what is in flight makes a scan and the outbox safe to overlap; an envelope
        # acknowledged in between may go out twice, which the recipient's dedupe absorbs.
        if item.id in self._inflight or item.expires_at <= time.time():
            return
        while len(self._inflight) >= DELIVERY_WINDOW:
            self._acked.clear()
            await self._acked.wait()
        self._inflight[item.id] = item.stored_at
        # The stored text is forwarded as is: no parse and re-encode of large envelopes.
        await self.ws.send_str(f'{{"type":"deliver","queuedAt":{item.stored_at!r},'
                               f'"envelope":{item.text}}}')


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
        if self.connections.get(conn.aid) is conn:
            del self.connections[conn.aid]
            if self.router is not None:
                await self.router.detached(conn)

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

    async def submit(self, sender: str, envelope: dict[str, object], frame_bytes: int, *,
                     via_hub: str | None = None) -> str:
        """Admit, store and route one envelope; returns its id. Raises :class:`Refusal`.

        ``via_hub`` names the federated hub that forwarded it for one of its agents: then the
        sender is that hub's agent, and the recipient must be homed here (no second hop). An
        envelope from a local node for an agent homed at a federated hub is handed to that hub
        (``federation``) and accepted once stored there."""
        limit = self.limits.max_envelope_bytes
        if frame_bytes > limit:
            raise Refusal("envelope-too-large",
                          f"the envelope is {frame_bytes} bytes; this hub accepts at most {limit} "
                          "bytes per envelope (hub option --max-envelope-bytes)")
        try:
            header = peek_header(envelope)
        except EnvelopeError as error:
            log.warning("event=refused reason=malformed-envelope from=%s detail=%r", sender,
                        str(error))
            raise Refusal("malformed-envelope", str(error)) from None
        if via_hub is None and header.sender != sender:
            log.warning("event=refused reason=wrong-sender from=%s claimed=%s id=%s", sender,
                        header.sender, header.id)
            raise Refusal("wrong-sender", f"the envelope says it is from {header.sender}, but "
                                          f"this connection is registered as {sender}")
        if not await self._is_registered(header.recipient):
            if via_hub is None and self.federation is not None:
                return await self.federation.forward(header.recipient, envelope)
            raise Refusal("unknown-recipient", f"{header.recipient} is not registered at this "
                                               "hub; look the agent up at its home hub")
        sender = header.sender
        text = json.dumps(envelope, separators=(",", ":"), ensure_ascii=False)
        now = time.time()
        try:
            seq = await self.storage.enqueue(id=header.id, sender=sender,
                                             recipient=header.recipient, text=text, now=now,
                                             ttl=self.limits.queue_ttl_s)
        except StorageError as error:
            self.metrics.storage_errors.inc()
            log.error("event=store-failed reason=%s from=%s to=%s id=%s", error.reason, sender,
                      header.recipient, header.id)
            raise Refusal(error.reason, f"{error.message}; the envelope was not stored, "
                                        "send it again later") from None
        log.debug("event=accepted from=%s to=%s id=%s bytes=%d", sender, header.recipient,
                  header.id, frame_bytes)
        self.metrics.relayed.inc()
        item = QueuedEnvelope(seq=seq, id=header.id, sender=sender, recipient=header.recipient,
                              text=text, stored_at=now, expires_at=now + self.limits.queue_ttl_s)
        conn = self.connections.get(header.recipient)
        if conn is not None:
            conn.push(item)
        elif self.router is not None:
            await self.router.route(item)
        return header.id

    async def ack(self, conn: Connection, envelope_id: str) -> None:
        stored_at = conn.acked(envelope_id)
        try:
            removed = await self.storage.remove(conn.aid, envelope_id)
        except StorageError as error:
            self.metrics.storage_errors.inc()
            # Not removed: it is delivered again on the next connection, and deduped there.
            log.error("event=ack-failed reason=%s aid=%s id=%s", error.reason, conn.aid,
                      envelope_id)
            return
        if removed:
            self.metrics.delivered.inc()
            if stored_at is not None:
                self.metrics.latency.observe(max(0.0, time.time() - stored_at))

    async def _is_registered(self, aid: str) -> bool:
        if aid in self._registered:
            return True
        record = await self.storage.get_agent(aid)
        if record is not None and record.state is AgentState.REGISTERED:
            self._registered.add(aid)
            return True
        return False
