"""Routing between the instances of one hub over NATS (https://docs.nats.io/nats-concepts/subjects).

Every envelope is in shared storage (``anet_hub.postgres``) before its sender hears ``accepted``
and stays there until its recipient acknowledges it, exactly as on one instance. NATS only
carries the news: the instance that accepted an envelope for a node connected elsewhere
publishes it on the node's subject, and the instance holding the node's WebSocket pushes it as
if it had been accepted there. A lost message costs latency, never the envelope: the holder
reads the node's queue from storage again when its broker connection comes back, when any
instance asks for it after losing messages, and every ``RESCAN_INTERVAL_S``.

Subjects, under ``anet.hub.<hub AID>``:

``node.<aid>.deliver``  an envelope for ``aid`` (headers: seq, id, from, stored, expires; the
                        envelope's JSON as payload, or none when it exceeds the broker's
                        ``max_payload``: then the holder reads the queue)
``node.<aid>.attach``   ``aid`` connected at the instance named in the headers: any other
                        instance closes its older connection for ``aid``, as one hub does
``rescan``              every instance reads the queues of its connections again

Which instance holds which node is also kept in storage (:class:`Presence`), for the directory's
``online``: an instance renews its entry every ``HEARTBEAT_S``, and one that stopped renewing it
(killed) no longer counts after ``PRESENCE_TTL_S``.

Needs the extra ``anet-hub[cluster]``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import uuid
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

import nats
from nats.aio.client import Client as NatsClient
from nats.aio.msg import Msg
from nats.aio.subscription import Subscription
from nats.errors import Error as NatsError
from nats.errors import SlowConsumerError

from anet_hub.credentials import BrokerCredentials
from anet_hub.delivery import Connection
from anet_hub.deployment import broker_name
from anet_hub.metrics import HubMetrics
from anet_hub.relay import Relay
from anet_hub.storage import QueuedEnvelope, StorageError

log = logging.getLogger(__name__)

CONNECT_TIMEOUT_S = 5
FIRST_CONNECT_S = 10.0
RECONNECT_WAIT_S = 0.5
PING_INTERVAL_S = 5
"""A broker that died without closing the socket is noticed after two missed pings."""
RESCAN_INTERVAL_S = 30.0
HEADER_ROOM_BYTES = 1024
HEARTBEAT_S = 5.0
PRESENCE_TTL_S = 3 * HEARTBEAT_S
REPLACED_CODE = 4001


@runtime_checkable
class Presence(Protocol):
    """Which instance holds which node (``anet_hub.postgres``)."""

    async def instance_alive(self, instance: str, url: str | None) -> None:
        """``instance`` runs now, taking nodes at ``url`` (its ``--public-url``)."""

    async def forget_instance(self, instance: str) -> None: ...

    async def set_presence(self, aid: str, instance: str) -> None: ...

    async def clear_presence(self, aid: str, instance: str) -> None: ...

    async def present(self, aids: list[str], *, within_s: float) -> set[str]: ...


@dataclass
class NatsRouter:
    """:class:`anet_hub.relay.Router` over a NATS connection."""

    relay: Relay
    presence: Presence
    hub_aid: str
    url: str
    metrics: HubMetrics
    credentials: BrokerCredentials = field(default_factory=BrokerCredentials)
    public_url: str | None = None
    """Where this instance takes nodes, as the others advertise it (anet_hub.advertisement)."""
    instance: str = field(default_factory=lambda: uuid.uuid4().hex)
    _nc: NatsClient | None = None
    _subscriptions: dict[str, Subscription] = field(default_factory=dict)
    _loops: list[asyncio.Task[None]] = field(default_factory=list)

    @property
    def prefix(self) -> str:
        return f"anet.hub.{self.hub_aid}"

    @property
    def connected(self) -> bool:
        return self._nc is not None and self._nc.is_connected

    async def start(self) -> None:
        """Connect (failing with ``ConnectionError`` naming the servers when none answers);
        from then on the client reconnects by itself for as long as the hub runs."""
        refused: asyncio.Future[BaseException] = asyncio.get_running_loop().create_future()

        async def on_error(error: Exception) -> None:
            # Until the first connection, a server that refuses the credentials or a
            # certificate that does not verify ends the start: retrying cannot change them.
            if self._nc is None and not refused.done() and _refusal(error):
                refused.set_result(error)
            await self._on_error(error)

        # Unbounded reconnection applies to the first connection too: bound that one.
        connecting = asyncio.ensure_future(nats.connect(
            self.url.split(","), name=f"anet-hub-{self.instance[:8]}",
            connect_timeout=CONNECT_TIMEOUT_S, reconnect_time_wait=RECONNECT_WAIT_S,
            max_reconnect_attempts=-1, ping_interval=PING_INTERVAL_S, max_outstanding_pings=2,
            allow_reconnect=True, error_cb=on_error, disconnected_cb=self._on_disconnected,
            reconnected_cb=self._on_reconnected, **self.credentials.options))
        await asyncio.wait({connecting, refused}, timeout=FIRST_CONNECT_S,
                           return_when=asyncio.FIRST_COMPLETED)
        try:
            if not connecting.done():
                connecting.cancel()
                raise refused.result() if refused.done() else TimeoutError()
            self._nc = connecting.result()
        except (NatsError, OSError, TimeoutError) as error:
            raise ConnectionError(f"cannot connect to {broker_name(self.url)}: "
                                  f"{str(error) or type(error).__name__}") from error
        await self._nc.subscribe(f"{self.prefix}.rescan", cb=self._on_rescan)
        self.metrics.follow_broker(lambda: self.connected)
        await self.presence.instance_alive(self.instance, self.public_url)
        self._loops = [asyncio.create_task(self._rescan_forever()),
                       asyncio.create_task(self._heartbeat_forever())]

    async def close(self) -> None:
        for loop in self._loops:
            loop.cancel()
        await asyncio.gather(*self._loops, return_exceptions=True)
        with contextlib.suppress(StorageError):
            await self.presence.forget_instance(self.instance)
        if self._nc is not None:
            with contextlib.suppress(NatsError, OSError, TimeoutError):
                await self._nc.close()
            self._nc = None

    # -- Router -------------------------------------------------------------------------------

    async def attached(self, conn: Connection) -> None:
        nc = self._nc
        assert nc is not None, "router used before start"
        try:
            previous = self._subscriptions.pop(conn.aid, None)
            if previous is not None:
                await previous.unsubscribe()
            self._subscriptions[conn.aid] = await nc.subscribe(f"{self.prefix}.node.{conn.aid}.*",
                                                               cb=self._on_node_message)
            # The broker has the subscription before the connection's first queue read, so an
            # envelope stored after that read is announced here.
            await nc.flush(timeout=CONNECT_TIMEOUT_S)
            await nc.publish(f"{self.prefix}.node.{conn.aid}.attach",
                             headers={"instance": self.instance, "since": repr(conn.since)})
        except (NatsError, OSError, TimeoutError) as error:
            self._failed("attach", error)
        try:
            await self.presence.set_presence(conn.aid, self.instance)
        except StorageError as error:
            log.warning("event=presence-failed aid=%s reason=%s", conn.aid, error.reason)

    async def detached(self, conn: Connection) -> None:
        subscription = self._subscriptions.pop(conn.aid, None)
        if subscription is not None:
            with contextlib.suppress(NatsError, OSError, TimeoutError):
                await subscription.unsubscribe()
        with contextlib.suppress(StorageError):
            await self.presence.clear_presence(conn.aid, self.instance)

    async def online_elsewhere(self, aids: list[str]) -> set[str]:
        return await self.presence.present(aids, within_s=PRESENCE_TTL_S)

    async def route(self, item: QueuedEnvelope) -> None:
        nc = self._nc
        assert nc is not None, "router used before start"
        payload = item.text.encode()
        headers = {"seq": str(item.seq), "id": item.id, "from": item.sender,
                   "stored": repr(item.stored_at), "expires": repr(item.expires_at)}
        if len(payload) + HEADER_ROOM_BYTES > nc.max_payload:
            payload = b""
        try:
            await nc.publish(f"{self.prefix}.node.{item.recipient}.deliver", payload,
                             headers=headers)
        except (NatsError, OSError, TimeoutError) as error:
            self._failed("route", error)

    # -- what the broker brings ---------------------------------------------------------------

    async def _on_node_message(self, msg: Msg) -> None:
        parts = msg.subject.split(".")
        aid, kind = parts[-2], parts[-1]
        conn = self.relay.connections.get(aid)
        headers = msg.headers or {}
        if conn is None:
            return
        if kind == "attach":
            if headers.get("instance") != self.instance \
                    and float(headers.get("since", "0")) >= conn.since:
                log.info("event=replaced-elsewhere aid=%s", aid)
                await conn.ws.close(code=REPLACED_CODE,
                                    message=b"replaced by a newer connection")
        elif kind == "deliver":
            if not msg.data:
                conn.rescan()
                return
            conn.push(QueuedEnvelope(seq=int(headers["seq"]), id=headers["id"],
                                     sender=headers["from"], recipient=aid,
                                     text=msg.data.decode(), stored_at=float(headers["stored"]),
                                     expires_at=float(headers["expires"])))

    async def _on_rescan(self, msg: Msg) -> None:
        self._rescan_all("asked by another instance")

    def _rescan_all(self, why: str) -> None:
        if self.relay.connections:
            log.debug("event=rescan connections=%d why=%r", len(self.relay.connections), why)
        for conn in list(self.relay.connections.values()):
            conn.rescan()

    async def _rescan_forever(self) -> None:
        while True:
            await asyncio.sleep(RESCAN_INTERVAL_S)
            self._rescan_all("periodic")

    async def _heartbeat_forever(self) -> None:
        while True:
            await asyncio.sleep(HEARTBEAT_S)
            try:
                await self.presence.instance_alive(self.instance, self.public_url)
            except StorageError as error:
                log.warning("event=heartbeat-failed reason=%s", error.reason)

    async def _on_disconnected(self) -> None:
        self.metrics.broker_errors.inc()
        log.warning("event=broker-disconnected servers=%s", self.url)

    async def _on_reconnected(self) -> None:
        # Messages for this instance may have been lost while it was away, and messages it
        # published may have been lost for the others.
        log.info("event=broker-reconnected servers=%s", self.url)
        self._rescan_all("the broker connection came back")
        assert self._nc is not None
        with contextlib.suppress(NatsError, OSError, TimeoutError):
            await self._nc.publish(f"{self.prefix}.rescan")

    async def _on_error(self, error: Exception) -> None:
        if isinstance(error, OSError):
            # A failed reconnection attempt, every RECONNECT_WAIT_S while the broker is away:
            # the disconnection itself was logged and counted once.
            log.debug("event=broker-reconnect-failed error=%r", str(error))
            return
        self._failed("client", error)
        if isinstance(error, SlowConsumerError):
            # The client dropped messages for this instance: read the queues instead.
            self._rescan_all("slow consumer")

    def _failed(self, what: str, error: BaseException) -> None:
        self.metrics.broker_errors.inc()
        log.warning("event=broker-error op=%s error=%r", what, str(error) or type(error).__name__)


def _refusal(error: Exception) -> bool:
    """The server refused this instance's credentials, or TLS its certificates."""
    text = str(error).lower()
    return isinstance(error, ssl.SSLError) or (
        isinstance(error, NatsError) and ("authoriz" in text or "authentic" in text))


async def reachable(url: str, credentials: BrokerCredentials) -> str | None:
    """None when a NATS server at ``url`` answers a round trip, else why not (the doctor)."""
    async def quiet(error: Exception) -> None:
        return None  # the answer below says what failed

    try:
        nc = await asyncio.wait_for(nats.connect(url.split(","), connect_timeout=CONNECT_TIMEOUT_S,
                                                 allow_reconnect=False, max_reconnect_attempts=1,
                                                 error_cb=quiet, **credentials.options),
                                    FIRST_CONNECT_S)
    except (NatsError, OSError, TimeoutError) as error:
        return str(error) or type(error).__name__
    try:
        await nc.flush(timeout=CONNECT_TIMEOUT_S)
    except (NatsError, OSError, TimeoutError) as error:
        return str(error) or type(error).__name__
    finally:
        with contextlib.suppress(NatsError, OSError, TimeoutError):
            await nc.close()
    return None
