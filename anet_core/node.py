"""The Node: the composition root that owns every core service of a running daemon."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from aiohttp import web

from anet_core.config import Config
from anet_core.metrics import NodeMetrics
from anet_core.plugins import Plugins
from anet_core.settings import DataPaths, Settings

if TYPE_CHECKING:
    from anet_core.evidence import EvidenceChain
    from anet_core.identity import Identity
    from anet_core.link import HubLink
    from anet_core.store import Store
    from anet_core.tasks import TaskLayer

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass
class Listener:
    """A listener as ``anet status`` shows it. ``state`` is "up" or "down"; ``detail`` says why."""

    name: str
    address: str
    state: str = "up"
    detail: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "address": self.address, "state": self.state,
                "detail": self.detail}


class NodeKey(Generic[T]):
    """A typed key for a module's state on the running node, as aiohttp's ``web.AppKey``:
    ``BACKENDS = NodeKey("backends", Backends)``, then ``node[BACKENDS] = service``."""

    def __init__(self, name: str, kind: type[T]) -> None:
        self.name = name
        self.kind = kind

    def __repr__(self) -> str:
        return f"<NodeKey {self.name}: {self.kind.__name__}>"


@dataclass
class Node:
    """One node: settings, configuration, identity, plugins and the listeners they open."""

    settings: Settings
    config: Config
    plugins: Plugins
    identity: Identity
    listeners: dict[str, Listener] = field(default_factory=dict)
    # Core services, opened by run() in dependency order (see _open_core_services).
    store: Store = field(init=False)
    evidence: EvidenceChain = field(init=False)
    hub: HubLink = field(init=False)
    tasks: TaskLayer = field(init=False)
    module_state: dict[NodeKey[Any], Any] = field(default_factory=dict)
    metrics: NodeMetrics = field(default_factory=NodeMetrics)
    started_at: float = field(default_factory=time.time)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def paths(self) -> DataPaths:
        return self.settings.paths

    @property
    def aid(self) -> str:
        return self.identity.aid

    def __getitem__(self, key: NodeKey[T]) -> T:
        return self.module_state[key]  # type: ignore[no-any-return]

    def __setitem__(self, key: NodeKey[T], value: T) -> None:
        self.module_state[key] = value

    def __delitem__(self, key: NodeKey[T]) -> None:
        del self.module_state[key]

    def get(self, key: NodeKey[T]) -> T | None:
        return self.module_state.get(key)

    def add_listener(self, listener: Listener) -> None:
        self.listeners[listener.name] = listener

    def status(self) -> dict[str, Any]:
        """What ``anet status`` shows of a running node."""
        return {
            "running": True,
            "pid": os.getpid(),
            "dataDir": str(self.paths.root),
            "aid": self.aid,
            "startedAt": self.started_at,
            "listeners": [listener.as_dict() for listener in self.listeners.values()],
            "modules": sorted(self.plugins.modules),
            "hub": self.hub.status.as_dict(),
        }

    async def run(self) -> None:
        """Start every lifespan, serve until ``stopping`` is set, then close in reverse order."""
        async with AsyncExitStack() as stack:
            await self._open_core_services(stack)
            for lifespan in self.plugins.collect("anet_lifespan", node=self):
                log.debug("event=lifespan-starting name=%s", lifespan.name)
                await stack.enter_async_context(lifespan.open())
            self.tasks.receive()  # tasks arrive only once the modules that claim them run
            await self.hub.refresh_card()  # with the skills the started modules offer
            log.info("event=node-ready aid=%s", self.aid)
            await self.stopping.wait()
            log.info("event=node-stopping aid=%s", self.aid)


    async def _open_core_services(self, stack: AsyncExitStack) -> None:
        """Store, evidence chain, hub link and task layer, in this order; closed in reverse."""
        from anet_core.evidence import EvidenceChain
        from anet_core.store import open_store
        self.store = await stack.enter_async_context(open_store(self.paths.database))
        self.metrics.follow_store(self.store)
        self.evidence = EvidenceChain(self.paths.evidence_chain, self.identity)
        from anet_core.link.client import open_hub_link
        self.hub = await stack.enter_async_context(open_hub_link(self))
        from anet_core.tasks import open_task_layer
        self.tasks = await stack.enter_async_context(open_task_layer(self, receive=False))


NODE_KEY = web.AppKey("node", Node)
"""The node, on every aiohttp application it serves."""
