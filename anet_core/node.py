"""The Node: the composition root that owns every core service of a running daemon."""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from aiohttp import web

from anet_core.config import Config, load_config
from anet_core.event_loop import event_loop_name
from anet_core.evidence import EvidenceChain
from anet_core.identity import Identity
from anet_core.link import HubLink
from anet_core.link.card import card_prices, who_serves_and_charges
from anet_core.link.client import HubClient, node_hub_client, open_hub_link
from anet_core.metrics import NodeMetrics
from anet_core.plugins import Plugins
from anet_core.records import (
    CancelCheck,
    EndingTask,
    InboundTask,
    PolicyVeto,
    RequesterTurn,
    SkillSource,
    TaskClaim,
    TaskGate,
    TurnHandler,
)
from anet_core.settings import DataPaths, Settings
from anet_core.store import Store, open_store
from anet_core.tasks import InboundPolicy, TaskLayer
from anet_core.util.memory import release_startup_memory

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
    """One node: settings, configuration, plugins, identity, the core services (store, evidence
    chain, hub link, task layer) and the listeners its modules open. :meth:`open` builds it."""

    settings: Settings
    config: Config
    plugins: Plugins
    identity: Identity
    store: Store
    evidence: EvidenceChain
    hub: HubLink
    tasks: TaskLayer
    metrics: NodeMetrics
    listeners: dict[str, Listener] = field(default_factory=dict)
    module_state: dict[NodeKey[Any], Any] = field(default_factory=dict)
    started_at: float = field(default_factory=time.time)
    stopping: asyncio.Event = field(default_factory=asyncio.Event)

    @classmethod
    @asynccontextmanager
    async def open(cls, settings: Settings, *, plugins: Plugins,
                   hub: HubLink | None = None) -> AsyncIterator[Node]:
        """The node of ``settings``' data directory (initialised: see ``anet_core.datadir``)
        with its core services running, closed when the block ends: the one place a node is
        built (the daemon, the tests and the benchmarks all come here).

        The services open in dependency order (store, evidence chain, hub link, task layer) and
        close in reverse. The hub link is the real one that config.json's ``hub`` describes,
        unless ``hub`` is given (a fake in tests; its owner runs and closes it). The task layer
        takes envelopes only from :meth:`TaskLayer.receive` on: :meth:`run` calls it once the
        modules started."""
        paths = settings.paths
        config = load_config(paths.config, plugins)
        identity = Identity.load(paths.identity)
        hooks = NodeHooks(plugins)
        async with AsyncExitStack() as stack:
            store = await stack.enter_async_context(open_store(paths.database))
            evidence = EvidenceChain(paths.evidence_chain, identity, journal=store)
            evidence.recover()  # what a crash took from the chain's tail, from the journal
            stack.push_async_callback(evidence.close)
            metrics = NodeMetrics()
            metrics.follow_store(store)
            client: HubClient | None = None
            if hub is None:
                hub = client = node_hub_client(identity, config, paths, hooks.card_skills)
            tasks = TaskLayer(store=store, hub=hub, identity=identity, hooks=hooks,
                              evidence=evidence, metrics=metrics,
                              no_response_after=config.node.no_response_after.total_seconds())
            node = cls(settings=settings, config=config, plugins=plugins, identity=identity,
                       store=store, evidence=evidence, hub=hub, tasks=tasks, metrics=metrics)
            hooks.bind(node)  # before anything starts: starting calls the hooks
            # A start the modules refuse (the policy against their configuration) ends before
            # the node registers at its hub: it leaves no trace there.
            tasks.refuse_vetoed_policy()
            if client is not None:
                await stack.enter_async_context(open_hub_link(client))
            tasks.start(receive=False, policy_checked=True)
            stack.push_async_callback(tasks.stop)
            yield node

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
            "card": who_serves_and_charges(
                self.plugins.collect("anet_card_skills", node=self)),
        }

    async def run(self) -> None:
        """Start every module's lifespan, take tasks, serve until ``stopping`` is set, then
        close the lifespans in reverse order (the core services close with :meth:`open`)."""
        async with AsyncExitStack() as stack:
            for lifespan in self.plugins.collect("anet_lifespan", node=self):
                log.debug("event=lifespan-starting name=%s", lifespan.name)
                await stack.enter_async_context(lifespan.open())
            self.tasks.receive()  # tasks arrive only once the modules that claim them run
            await self.hub.refresh_card()  # with the skills the started modules offer
            log.info("event=node-ready aid=%s loop=%s", self.aid,
                     event_loop_name(asyncio.get_running_loop()))
            release_startup_memory()
            await self.stopping.wait()
            log.info("event=node-stopping aid=%s", self.aid)


class NodeHooks:
    """The modules' hooks as the core services call them (``TaskHooks`` of the task layer, the
    hub link's skill sources), each given the node as ``node``. The node is made of those
    services, so :meth:`Node.open` binds it once it exists, before any service starts."""

    def __init__(self, plugins: Plugins) -> None:
        self._plugins = plugins
        self._node: Node | None = None

    def bind(self, node: Node) -> None:
        self._node = node

    @property
    def node(self) -> Node:
        if self._node is None:
            raise RuntimeError("a hook was called before Node.open built the node")
        return self._node

    def take_task(self, task: InboundTask) -> TaskClaim | None:
        claim: TaskClaim | None = self._plugins.hook.anet_take_task(node=self.node, task=task)
        return claim

    def task_gate(self, task: InboundTask) -> TaskGate | None:
        gate: TaskGate | None = self._plugins.hook.anet_task_gate(node=self.node, task=task)
        return gate

    def task_ending(self, task: EndingTask) -> TaskGate | None:
        gate: TaskGate | None = self._plugins.hook.anet_task_ending(node=self.node, task=task)
        return gate

    def policy_vetoes(self, policy: InboundPolicy) -> list[PolicyVeto]:
        return [veto for veto in self._plugins.hook.anet_policy_veto(
            node=self.node, policy=policy) if veto is not None]

    def requester_waiting(self, turn: RequesterTurn) -> TurnHandler | None:
        handler: TurnHandler | None = self._plugins.hook.anet_requester_waiting(
            node=self.node, turn=turn)
        return handler

    def requester_answer(self, turn: RequesterTurn) -> TurnHandler | None:
        handler: TurnHandler | None = self._plugins.hook.anet_requester_answer(
            node=self.node, turn=turn)
        return handler

    def requester_cancel(self, turn: RequesterTurn) -> CancelCheck | None:
        check: CancelCheck | None = self._plugins.hook.anet_requester_cancel(
            node=self.node, turn=turn)
        return check

    def requester_ended(self, turn: RequesterTurn) -> list[tuple[str, dict[str, Any]]]:
        """Each module asked on its own: one that fails loses its records, not the others'."""
        arguments = {"node": self.node, "turn": turn}
        records: list[tuple[str, dict[str, Any]]] = []
        for impl in self._plugins.pm.hook.anet_requester_ended.get_hookimpls():
            try:
                records += impl.function(*(arguments[name] for name in impl.argnames)) or []
            except Exception:
                log.exception("event=ended-records-failed module=%s task=%s", impl.plugin_name,
                              turn.task_id)
        return records

    def card_skills(self) -> list[SkillSource]:
        return self._plugins.collect("anet_card_skills", node=self.node)

    def card_prices(self) -> dict[str, dict[str, Any]]:
        return card_prices(self.card_skills)


NODE_KEY = web.AppKey("node", Node)
"""The node, on every aiohttp application it serves."""
