"""Real nodes in this process for the hub cluster and federation tests: a provider module that
serves every task and counts what reaches it, and bounded waits on the requester's tasks."""

from __future__ import annotations

import asyncio
import uuid
from collections import Counter
from collections.abc import Sequence
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from anet_core import hookimpl
from anet_core.config import read_raw, write_config
from anet_core.datadir import initialise
from anet_core.link.contract import JoinState
from anet_core.node import Node
from anet_core.plugins import make_plugins
from anet_core.records import InboundTask, TaskClaim
from anet_core.settings import Settings
from tests.support.nodes import running_node
from tests.support.waiting import eventually

COMPLETED = "TASK_STATE_COMPLETED"
RECOVERY_S = 60.0


class Provider:
    """Bob's module: serves every task at once and counts what reached it."""

    def __init__(self) -> None:
        self.served: Counter[str] = Counter()

    @hookimpl
    def anet_take_task(self, node: Node, task: InboundTask) -> TaskClaim | None:
        async def serve(task: InboundTask, responder: Any) -> None:
            self.served[task.task_id] += 1
            await responder.complete(artifacts=[f"done: {task.message['parts'][0]['text']}"])

        return TaskClaim(module="provider", serve=serve)


async def start_node(stack: AsyncExitStack, root: Path, url: str,
                     provider: Provider | None = None, *,
                     instances: Sequence[str] = ()) -> Node:
    """A node in this process joined to the hub at ``url`` (and its other ``instances``),
    registered; bob's when it has the ``provider``."""
    settings = Settings(data_dir=root)
    initialise(settings.paths)
    raw = read_raw(settings.paths.config)
    raw["hub"] = {"url": url, "instances": list(instances)}
    write_config(settings.paths.config, raw)
    plugins = make_plugins(load_entry_points=False)
    if provider is not None:
        plugins.pm.register(provider, name="provider")
    node = await stack.enter_async_context(running_node(root, plugins))
    await eventually(lambda: node.hub.status.state is JoinState.REGISTERED,
                f"{root.name} registered at {url}")
    return node


async def send_tasks(alice: Node, bob: Node, count: int, label: str, *,
                     pause: float = 0.0) -> list[str]:
    ids = []
    for n in range(count):
        await asyncio.sleep(pause)
        task = await alice.tasks.send(bob.identity.aid, {
            "messageId": f"m-{uuid.uuid4().hex}", "role": "ROLE_USER",
            "parts": [{"text": f"{label} {n}"}]})
        ids.append(task["id"])
    return ids


def states(alice: Node, ids: list[str]) -> Counter[str]:
    return Counter(alice.tasks.get(None, task_id)["status"]["state"] for task_id in ids)


async def all_completed(alice: Node, ids: list[str], timeout: float = RECOVERY_S) -> None:
    await eventually(lambda: states(alice, ids) == Counter({COMPLETED: len(ids)}),
                f"all {len(ids)} tasks completed (now {dict(states(alice, ids))})", timeout)
