"""What load balancers, supervisors and Prometheus ask a hub instance.

``GET /healthz``  200 while the process serves requests (liveness: restart it otherwise)
``GET /readyz``   200 when its storage answers and, in a cluster, its broker is connected; 503
                  naming each dependency that is down (take it out of the balancer meanwhile)
``GET /metrics``  the Prometheus text format (``anet_hub.metrics``)

The same dependency checks serve ``anet hub doctor``, from the hub's data directory.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp
from aiohttp import web

from anet_core.api import AnetError, Identity, IdentityError
from anet_hub.credentials import BrokerCredentials
from anet_hub.deployment import Deployment, broker_name, open_existing, storage_name
from anet_hub.storage import HubStorage, StorageError

if TYPE_CHECKING:
    from anet_hub.app import HubState

PROBE_TIMEOUT_S = 2.0


@dataclass(frozen=True)
class Dependency:
    name: str
    ok: bool
    detail: str

    def as_dict(self) -> dict[str, object]:
        return {"name": self.name, "ok": self.ok, "detail": self.detail}


async def storage_dependency(storage: HubStorage, where: str) -> Dependency:
    try:
        await asyncio.wait_for(storage.ping(), PROBE_TIMEOUT_S)
    except StorageError as error:
        return Dependency("storage", False, f"{where}: {error.message}")
    except TimeoutError:
        return Dependency("storage", False, f"{where}: no answer within {PROBE_TIMEOUT_S:g} s")
    return Dependency("storage", True, where)


async def dependencies(hub: HubState) -> list[Dependency]:
    found = [await storage_dependency(hub.storage, hub.storage_name)]
    if hub.router is not None:
        found.append(Dependency("broker", hub.router.connected,
                                hub.broker_name if hub.router.connected
                                else f"{hub.broker_name}: disconnected, reconnecting"))
    return found


def add_probe_routes(app: web.Application, state_key: web.AppKey[HubState]) -> None:
    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(request: web.Request) -> web.Response:
        found = await dependencies(request.app[state_key])
        ready = all(dependency.ok for dependency in found)
        return web.json_response({"ready": ready,
                                  "dependencies": [item.as_dict() for item in found]},
                                 status=200 if ready else 503)

    async def metrics(request: web.Request) -> web.Response:
        hub = request.app[state_key]
        with contextlib.suppress(StorageError):  # counted by the storage (anet_hub.counted)
            hub.metrics.queued.set(await hub.storage.count_queued())
        return web.Response(body=hub.metrics.exposition(),
                            headers={"Content-Type": hub.metrics.meters.content_type()})

    app.router.add_get("/healthz", healthz)
    app.router.add_get("/readyz", readyz)
    app.router.add_get("/metrics", metrics)


async def doctor(data_dir: Path, instance_url: str | None) -> list[Dependency]:
    """Each dependency of the hub served from ``data_dir``: its operator key, its storage, its
    broker, and what the running instance at ``instance_url`` says of itself."""
    found: list[Dependency] = []
    try:
        identity = await asyncio.to_thread(Identity.load, data_dir / "identity")
        found.append(Dependency("identity", True, f"hub {identity.aid}"))
        hub_aid: str | None = identity.aid
    except (IdentityError, OSError, ValueError) as error:
        found.append(Dependency("identity", False, str(error)))
        hub_aid = None
    deployment = Deployment.read(data_dir)
    try:
        storage = await open_existing(data_dir, hub_aid=hub_aid)
    except AnetError as error:
        found.append(Dependency("storage", False, error.message))
    else:
        try:
            found.append(await storage_dependency(storage, storage_name(data_dir, deployment)))
        finally:
            await storage.close()
    if deployment.nats:
        from anet_hub.cluster import reachable

        where = broker_name(deployment.nats)
        try:
            why = await reachable(deployment.nats, BrokerCredentials.from_environment())
        except ValueError as error:
            why = str(error)
        found.append(Dependency("broker", why is None, where if why is None else f"{where}: {why}"))
    if instance_url:
        found.append(await _instance(instance_url))
    return found


async def _instance(url: str) -> Dependency:
    base = url.rstrip("/").replace("ws://", "http://", 1).replace("wss://", "https://", 1)
    try:
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http, \
                http.get(f"{base}/readyz") as response:
            body = await response.json()
    except (aiohttp.ClientError, TimeoutError, ValueError) as error:
        return Dependency("instance", False, f"{base}: {str(error) or type(error).__name__}")
    down = [f"{item['name']} ({item['detail']})" for item in body.get("dependencies", [])
            if not item.get("ok")]
    if body.get("ready"):
        return Dependency("instance", True, f"{base} is ready")
    return Dependency("instance", False, f"{base} is not ready: {', '.join(down) or '?'} down")
