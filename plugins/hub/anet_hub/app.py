"""The hub's aiohttp application: the WebSocket for nodes, HTTP reads, and ``anet hub serve``.

HTTP (all JSON, all public: the directory is signed by its authors, not secret)::

    GET /v1/health          {"status": "ok", "hubAid", "connected", "protocol"}
    GET /v1/hub             the hub's AID, key history, limits, signed official list, its
                            instances (signed) and its federation links
    GET /v1/agents          search: ?skill=&tag=&q=&cursor=&limit=
    GET /v1/agents/{aid}    one directory entry
    GET /v1/ws              the nodes' WebSocket (frames: anet_core.protocol.frames)
    GET /healthz, /readyz, /metrics   for load balancers and Prometheus (anet_hub.probes)
    /x402/…                 the payment rail: verify, settle, supported, balance
                            (anet_hub.rail_routes)

One process is one instance. With ``--postgres`` (and ``--nats`` for more than one instance),
instances of the same hub share storage and route envelopes between them (anet_hub.cluster).
"""

from __future__ import annotations

import asyncio
import functools
import logging
import signal
import time
from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, cast
from urllib.parse import urlsplit

from aiohttp import web
from pydantic import ValidationError

from anet_core.api import (
    AID_REGEX,
    SERVER_LOG,
    AnetError,
    Identity,
    event_loop_name,
    private_dir,
    release_startup_memory,
)
from anet_core.protocol.frames import (
    MAX_SEARCH_LIMIT,
    PROTOCOL_VERSION,
    WS_PATH,
    InstancesFrame,
    Refusal,
    SearchFrame,
)
from anet_hub.advertisement import Advertisement, InstanceUrls
from anet_hub.counted import CountedStorage
from anet_hub.credentials import BrokerCredentials
from anet_hub.defaults import (
    DEFAULT_BURST,
    DEFAULT_HEARTBEAT_S,
    DEFAULT_MAX_ENVELOPE_BYTES,
    DEFAULT_RATE_PER_SECOND,
)
from anet_hub.deployment import (
    CLUSTER_EXTRA,
    SQLITE_FILE,
    Deployment,
    broker_name,
    open_storage,
    storage_name,
)
from anet_hub.directory import Directory, authority
from anet_hub.federation import FederationLimits, FederationService, PeerHub
from anet_hub.http_errors import json_error, storage_errors
from anet_hub.metrics import HubMetrics
from anet_hub.probes import add_probe_routes
from anet_hub.rail_routes import add_rail_routes
from anet_hub.relay import MAX_QUEUE_TTL_S, Relay, RelayLimits, Router, SharedBuckets
from anet_hub.session import Session
from anet_hub.storage import HubStorage, StorageError

log = logging.getLogger(__name__)

DEFAULT_QUEUE_TTL_S = MAX_QUEUE_TTL_S
FRAME_SLACK_BYTES = 64 * 1024
"""WebSocket messages may exceed the envelope limit by this much, so an oversize envelope is
answered with a clear ``envelope-too-large`` frame instead of a closed connection."""
MIN_HEARTBEAT_S, MAX_HEARTBEAT_S = 1.0, 300.0
HEARTBEAT_CHECKS = 6
"""Each heartbeat the watcher looks this often: a frozen peer is cut within 1.5 heartbeats
and a sixth."""
SWEEP_INTERVAL_S = 60.0


@dataclass(frozen=True)
class HubConfig:
    data_dir: Path
    approval: bool = False
    max_envelope_bytes: int = DEFAULT_MAX_ENVELOPE_BYTES
    rate_per_second: float = DEFAULT_RATE_PER_SECOND
    burst: int = DEFAULT_BURST
    queue_ttl_s: float = DEFAULT_QUEUE_TTL_S
    public_url: str | None = None
    """The address nodes use when it is not what the hub sees in Host (a proxy in front)."""
    max_storage_bytes: int | None = None
    deployment: Deployment = field(default_factory=Deployment)
    federate: tuple[PeerHub, ...] = ()
    """Hubs of other operators this hub forwards to, and accepts forwards from."""
    federation_limits: FederationLimits = field(default_factory=FederationLimits)
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    """``--heartbeat`` (anet_hub.defaults.DEFAULT_HEARTBEAT_S says what it does)."""

    def __post_init__(self) -> None:
        if not MIN_HEARTBEAT_S <= self.heartbeat_s <= MAX_HEARTBEAT_S:
            raise ValueError(f"the heartbeat must be between {MIN_HEARTBEAT_S:g} s and "
                             f"{MAX_HEARTBEAT_S:g} s, got {self.heartbeat_s:g}: a peer that "
                             "froze is offline after one and a half of it")
        if not 0 < self.queue_ttl_s <= MAX_QUEUE_TTL_S:
            raise ValueError(f"the queue TTL must be between 0 and {MAX_QUEUE_TTL_S:g} s "
                             f"(recipients refuse older envelopes), got {self.queue_ttl_s:g}")
        if self.max_envelope_bytes < 1024 or self.rate_per_second <= 0 or self.burst < 1:
            raise ValueError("limits must be positive (max envelope at least 1024 bytes)")

    @property
    def identity_dir(self) -> Path:
        return self.data_dir / "identity"

    @property
    def database(self) -> Path:
        return self.data_dir / SQLITE_FILE


class ClusterRouter(Router, Protocol):
    """The router of an instance in a cluster (``anet_hub.cluster.NatsRouter``)."""

    @property
    def connected(self) -> bool: ...

    @property
    def credentials(self) -> BrokerCredentials: ...

    async def close(self) -> None: ...


@dataclass
class HubState:
    config: HubConfig
    identity: Identity
    storage: HubStorage
    directory: Directory
    relay: Relay
    metrics: HubMetrics
    advertisement: Advertisement
    router: ClusterRouter | None = None
    federation: FederationService | None = None
    sends: set[asyncio.Task[None]] = field(default_factory=set)
    """Pings and announcements on their way (:func:`_fire`)."""
    sessions: set[Session] = field(default_factory=set)
    """Every WebSocket session open now (nodes, federated hubs, and those still answering the
    challenge): watched by :func:`_watch_heartbeats`, closed first at shutdown so that no
    handler keeps the stop waiting."""

    @property
    def storage_name(self) -> str:
        return storage_name(self.config.data_dir, self.config.deployment)

    @property
    def broker_name(self) -> str:
        """The broker's servers and how this instance authenticates there (nothing secret)."""
        if self.router is None:
            return "none"
        servers = broker_name(self.config.deployment.nats or "")
        return f"{servers} ({self.router.credentials.description})"

    async def official_list(self) -> dict[str, Any] | None:
        return await self.storage.get_official_list()


CONFIG_KEY = web.AppKey("hub-config", HubConfig)
STATE_KEY = web.AppKey("hub-state", HubState)

routes = web.RouteTableDef()


@routes.get(WS_PATH)
async def websocket(request: web.Request) -> web.StreamResponse:
    hub = request.app[STATE_KEY]
    # The session answers pings itself (autoping off), so that every frame counts as the
    # peer's last sign of life (its lastSeen), a ping as much as a task; one task watches every
    # session's silence (_watch_heartbeats) instead of a timer per connection.
    ws = web.WebSocketResponse(compress=False, autoping=False,
                               max_msg_size=hub.config.max_envelope_bytes + FRAME_SLACK_BYTES)
    await ws.prepare(request)
    session = Session(hub, ws, remote=request.remote or "?", transport=request.transport,
                      authorities=_authorities(request.scheme, request.host,
                                               hub.config.public_url))
    hub.sessions.add(session)
    try:
        await session.run()
    finally:
        hub.sessions.discard(session)
    return ws


@functools.lru_cache(maxsize=256)
def _authorities(scheme: str, host: str, public_url: str | None) -> frozenset[str]:
    """The ``host:port`` forms a node may have signed for (shared by the sessions that came
    the same way, so each does not hold a copy)."""
    found = {authority("ws" if scheme == "http" else "wss", host)}
    if public_url:
        public = urlsplit(public_url)
        found.add(authority(public.scheme, public.netloc))
    return frozenset(found)


@routes.get("/v1/health")
async def health(request: web.Request) -> web.Response:
    hub = request.app[STATE_KEY]
    return web.json_response({"status": "ok", "hubAid": hub.identity.aid,
                              "connected": len(hub.relay.connections),
                              "protocol": PROTOCOL_VERSION})


@routes.get("/v1/hub")
async def hub_info(request: web.Request) -> web.Response:
    hub = request.app[STATE_KEY]
    limits = hub.relay.limits
    return web.json_response({
        "aid": hub.identity.aid, "history": hub.identity.history,
        "officialList": await hub.official_list(),
        "instances": hub.advertisement.doc,
        "limits": {"maxEnvelopeBytes": limits.max_envelope_bytes,
                   "ratePerSecond": limits.rate_per_second, "burst": limits.burst,
                   "queueTtlSeconds": limits.queue_ttl_s},
        "federation": [{"aid": link.peer.aid, "url": link.url, "urls": list(link.urls),
                        "state": link.state}
                       for link in (hub.federation.links.values() if hub.federation else ())]})


@routes.get("/v1/agents")
async def agents(request: web.Request) -> web.Response:
    hub = request.app[STATE_KEY]
    try:
        query = SearchFrame.model_validate({"type": "search", "rid": "http",
                                            **request.query})
    except ValidationError as error:
        first = error.errors()[0]
        return json_error(400, "bad-query", f"{'.'.join(map(str, first['loc']))}: {first['msg']} "
                                        f"(limit is 1..{MAX_SEARCH_LIMIT})")
    try:
        entries, cursor = await hub.directory.search(query)
    except Refusal as refusal:
        return json_error(400, refusal.reason, refusal.message)
    return web.json_response({
        "entries": [entry.model_dump(by_alias=True) for entry in entries],
        "nextCursor": cursor, "officialList": await hub.official_list()})


@routes.get(f"/v1/agents/{{aid:{AID_REGEX}}}")
async def agent(request: web.Request) -> web.Response:
    hub = request.app[STATE_KEY]
    try:
        entry = await hub.directory.lookup(request.match_info["aid"])
    except Refusal as refusal:
        return json_error(404, refusal.reason, refusal.message)
    return web.json_response({"entry": entry.model_dump(by_alias=True),
                              "officialList": await hub.official_list()})


async def _hub_state(app: web.Application) -> AsyncIterator[None]:
    """Open the identity, the storage and the broker, run the sweeper; close all in reverse."""
    config = app[CONFIG_KEY]
    # Who sends to whom, how much and when (hub.db) is nobody else's to read, as on a node.
    widened = private_dir(config.data_dir)
    if widened is not None:
        log.warning("event=data-dir-tightened dir=%s was=%o now=700", config.data_dir, widened)
    identity, created = await asyncio.to_thread(Identity.load_or_create, config.identity_dir)
    if created:
        log.info("event=identity-created aid=%s dir=%s", identity.aid, config.identity_dir)
    metrics = HubMetrics()
    opened = await open_storage(config.data_dir, config.deployment, hub_aid=identity.aid,
                                max_bytes=config.max_storage_bytes)
    storage = cast(HubStorage, CountedStorage(  # the proxy is the storage, counted
        opened, lambda operation: metrics.storage_errors.labels(operation).inc()))
    shared = storage if isinstance(storage, SharedBuckets) else None
    relay = Relay(storage, RelayLimits(config.max_envelope_bytes, config.rate_per_second,
                                       config.burst, config.queue_ttl_s), metrics,
                  shared_buckets=shared)
    metrics.follow_connections(lambda: len(relay.connections))
    router: ClusterRouter | None = None
    federation: FederationService | None = None
    advertisement = Advertisement(identity, config.public_url)
    advertisement.update()
    try:
        if config.deployment.nats:
            router = await _start_router(relay, storage, identity.aid, config.deployment.nats,
                                         metrics, config.public_url)
            relay.router = router
        if config.federate:
            federation = FederationService(identity, {peer.aid: peer for peer in config.federate},
                                           config.federation_limits,
                                           heartbeat_s=config.heartbeat_s, saved=storage)
            await federation.start()
            relay.federation = federation
        directory = Directory(storage, approval=config.approval, online=relay.online_among,
                              federated=federation.lookup if federation else None)
        app[STATE_KEY] = hub = HubState(config, identity, storage, directory, relay, metrics,
                                        advertisement, router, federation)
        advertisement.on_change = functools.partial(_announce, hub)
        background = [asyncio.create_task(_sweep(storage, relay)),
                      asyncio.create_task(_watch_heartbeats(app[STATE_KEY]))]
        if router is not None and isinstance(storage, InstanceUrls):
            background.append(asyncio.create_task(advertisement.follow(storage)))
        try:
            yield
        finally:
            for task in background:
                task.cancel()
            await asyncio.gather(*background, return_exceptions=True)
            await relay.drain()
    finally:
        if federation is not None:
            await federation.close()
        if router is not None:
            await router.close()
        await storage.close()


async def _start_router(relay: Relay, storage: HubStorage, hub_aid: str, url: str,
                        metrics: HubMetrics, public_url: str | None) -> ClusterRouter:
    try:
        from anet_hub.cluster import NatsRouter, Presence
    except ImportError:
        raise AnetError("hub-cluster-missing", "routing over NATS needs the cluster extra",
                        hint=CLUSTER_EXTRA) from None
    assert isinstance(storage, Presence), "--nats is refused without --postgres"
    try:
        credentials = BrokerCredentials.from_environment()
    except ValueError as error:
        raise AnetError("hub-broker-credentials", str(error)) from None
    router = NatsRouter(relay, storage, hub_aid, url, metrics, credentials, public_url)
    try:
        await router.start()
    except ConnectionError as error:
        raise AnetError("hub-broker-unreachable", f"{error} (hub-broker-unreachable)",
                        hint="start NATS, or check --nats") from None
    return router


async def _close_sockets(app: web.Application) -> None:
    # Runs before cleanup: open WebSockets would otherwise keep the shutdown waiting (a
    # federated hub's too, which stops at the same time and waits in turn: 10 s for two).
    if STATE_KEY in app:
        await asyncio.gather(*(session.ws.close(code=1001, message=b"hub shutting down")
                               for session in list(app[STATE_KEY].sessions)),
                             return_exceptions=True)


def _announce(hub: HubState, doc: dict[str, Any]) -> None:
    """Tell every registered node and federated hub of the hub's instances as they are now, so
    that a connection made before an instance started fails over to it too."""
    frame = InstancesFrame(instances=doc).dump()
    for session in hub.sessions:
        if session.aid is not None and not session.ws.closed:
            _fire(hub.sends, session.ws.send_str(frame))


def _fire(pending: set[asyncio.Task[None]], send: Coroutine[Any, Any, None]) -> None:
    """Send without waiting, each on its own: a peer that reads nothing must not hold the
    others up, and one that went away meanwhile is no error."""
    task = asyncio.create_task(send)
    pending.add(task)
    task.add_done_callback(_sent(pending))


def _sent(pending: set[asyncio.Task[None]]) -> Callable[[asyncio.Task[None]], None]:
    def done(task: asyncio.Task[None]) -> None:
        pending.discard(task)
        if not task.cancelled():
            task.exception()  # a connection that went away meanwhile: nothing to do

    return done


async def _watch_heartbeats(hub: HubState) -> None:
    """Ping each peer silent for ``--heartbeat``, and cut one silent for half as long again
    (docs/protocol.md, "Heartbeats"). A frame of any kind, a pong too, ends a silence
    (``Session.last_frame_at``); a cut connection ends its session, whose ``lastSeen`` is
    that last frame. One task for every connection: no timer per connection to keep."""
    heartbeat = hub.config.heartbeat_s
    while True:
        await asyncio.sleep(heartbeat / HEARTBEAT_CHECKS)
        now = time.time()
        for session in list(hub.sessions):
            silent = now - session.last_frame_at
            if silent > heartbeat * 1.5:
                log.info("event=heartbeat-missed aid=%s remote=%s silentFor=%.1f",
                         session.aid, session.remote, silent)
                if session.transport is not None:
                    session.transport.abort()
            elif silent > heartbeat and not session.ws.closed:
                _fire(hub.sends, session.ws.ping())


async def _sweep(storage: HubStorage, relay: Relay) -> None:
    while True:
        await asyncio.sleep(SWEEP_INTERVAL_S)
        try:
            await relay.forget_idle_buckets()
            purged = await storage.purge_expired(time.time())
        except StorageError as error:
            log.error("event=sweep-failed reason=%s", error.reason)
            continue
        if purged:
            log.info("event=expired count=%d", purged)


def build_app(config: HubConfig) -> web.Application:
    app = web.Application()
    app[CONFIG_KEY] = config
    for route in routes:
        assert isinstance(route, web.RouteDef)
        handler = route.handler if route.path == WS_PATH else storage_errors(route.handler)
        app.router.add_route(route.method, route.path, handler, **route.kwargs)
    add_probe_routes(app, STATE_KEY)
    add_rail_routes(app, STATE_KEY)
    app.cleanup_ctx.append(_hub_state)
    app.on_shutdown.append(_close_sockets)
    return app


def parse_listen(listen: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) → (host, port)."""
    host, sep, port = listen.rpartition(":")
    if not sep or not port.isdigit() or not host:
        raise ValueError(f"--listen {listen!r}: expected HOST:PORT, e.g. 127.0.0.1:8765")
    return host.strip("[]"), int(port)


async def serve(config: HubConfig, host: str, port: int) -> None:
    """Run the hub until SIGTERM or SIGINT; then close every connection and the storage."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, stop.set)
    runner = web.AppRunner(build_app(config), access_log=None, shutdown_timeout=5.0,
                           logger=SERVER_LOG)
    await runner.setup()
    try:
        site = web.TCPSite(runner, host, port)
        await site.start()
        state = runner.app[STATE_KEY]
        log.info("event=listening addresses=%s hubAid=%s storage=%r broker=%r approval=%s "
                 "maxEnvelopeBytes=%d rate=%g burst=%d queueTtl=%g heartbeat=%g loop=%s",
                 ",".join(f"{address[0]}:{address[1]}" for address in runner.addresses),
                 state.identity.aid, state.storage_name,
                 state.broker_name, config.approval,
                 config.max_envelope_bytes, config.rate_per_second, config.burst,
                 config.queue_ttl_s, config.heartbeat_s, event_loop_name(loop))
        release_startup_memory()
        await stop.wait()
        log.info("event=stopping")
    finally:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(signum)
        await runner.cleanup()
        log.info("event=stopped")
