"""Nodes in the test's own event loop, built the one way every node is (``Node.open``).

- :func:`open_node`: the core services only (store, evidence chain, hub link, task layer), taking
  tasks at once, no module started: linked to a :class:`~tests.support.fakes.FakeHub`, or to the
  real hub that config.json names;
- :func:`running_node`: the node as the daemon runs it: the modules' lifespans and the control
  plane too (``Node.run``), with the real hub link.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path
from typing import Any

from anet_core.config import read_raw, write_config
from anet_core.datadir import initialise
from anet_core.identity import Identity
from anet_core.link.contract import JoinState
from anet_core.node import Node
from anet_core.plugins import Plugins, make_plugins
from anet_core.settings import Settings
from tests.support.fakes import FakeHub
from tests.support.waiting import eventually

READY_TIMEOUT_S = 30.0


def plugins_with(*modules: object) -> Plugins:
    """The built-in plugins and ``modules`` (objects with ``@hookimpl`` methods), no entry
    points: a node of exactly these modules."""
    plugins = make_plugins(load_entry_points=False)
    for index, module in enumerate(modules):
        plugins.pm.register(module, name=f"test-module-{index}")
    plugins.pm.check_pending()
    return plugins


def prepare(root: Path, **sections: dict[str, Any]) -> Settings:
    """The data directory ``root`` as ``anet init`` leaves it (created the first time, kept
    after), with the config.json ``sections`` given (``hub={"url": ...}``, ``node={...}``)
    merged into what is there."""
    settings = Settings(data_dir=root)
    initialise(settings.paths)
    if sections:
        raw = read_raw(settings.paths.config)
        for name, values in sections.items():
            raw[name] = {**raw.get(name, {}), **values}
        write_config(settings.paths.config, raw)
    return settings


@asynccontextmanager
async def open_node(root: Path, hub: FakeHub | None = None, *, plugins: Plugins | None = None,
                    no_response_after: str | None = None) -> AsyncIterator[Node]:
    """A node over ``root`` with its core services open and taking tasks, no module started.

    Linked to ``hub`` when given, else to the hub config.json names (none: not joined).
    ``no_response_after`` sets config.json's ``node.no_response_after``."""
    settings = prepare(root, **({"node": {"no_response_after": no_response_after}}
                                if no_response_after else {}))
    async with AsyncExitStack() as stack:
        link = None if hub is None else await stack.enter_async_context(
            hub.connected(Identity.load(settings.paths.identity)))
        node = await stack.enter_async_context(Node.open(
            settings, plugins=plugins or make_plugins(load_entry_points=False), hub=link))
        node.tasks.receive()  # the daemon does this once its modules run
        yield node


@asynccontextmanager
async def running_node(root: Path, plugins: Plugins | None = None, *,
                       hub_url: str | None = None) -> AsyncIterator[Node]:
    """A node over ``root`` as the daemon runs it, in this event loop: ready (its control plane
    listening; with ``hub_url``, joined to that hub and registered there) when the block starts,
    stopped when it ends."""
    settings = prepare(root, **({"hub": {"url": hub_url}} if hub_url else {}))
    async with Node.open(settings,
                         plugins=plugins or make_plugins(load_entry_points=False)) as node:
        run = asyncio.create_task(node.run())

        def ready() -> bool:
            if run.done():
                run.result()  # the node failed to start: its error, not a timeout
            return "control" in node.listeners

        try:
            await eventually(ready, "the node's control plane listens", READY_TIMEOUT_S)
            if hub_url:
                await eventually(lambda: node.hub.status.state is JoinState.REGISTERED,
                                 f"{root.name} registered at {hub_url}", READY_TIMEOUT_S)
            yield node
        finally:
            node.stopping.set()
            async with asyncio.timeout(READY_TIMEOUT_S):
                await run
