"""Key rotations in the middle of a conversation, through a real hub: both sides rotate (one of
them in an emergency) and the next tasks still open, complete and carry verified receipts."""

from __future__ import annotations

import asyncio
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from anet_core.control.client import ControlClient
from anet_core.link import JoinState
from anet_core.node import Node
from anet_core.plugins import make_plugins
from tests.conftest import running_node
from tests.support import HubProcess, free_port, until
from tests.tasks.test_hub_sees_no_content import Answers, joined


async def rotate(node: Node, *, emergency: bool) -> dict[str, Any]:
    """``anet keys rotate`` as the CLI does it: through the daemon's control plane."""
    client = ControlClient(node.paths)
    return await asyncio.to_thread(client.post, "/tasks/keys/rotate", {"emergency": emergency})


async def round_trip(alice: Node, bob: Node, text: str) -> dict[str, Any]:
    task = await alice.tasks.send(bob.aid, {"messageId": f"m-{text}", "role": "ROLE_USER",
                                            "parts": [{"text": text}]})
    await until(lambda: alice.tasks.get(None, task["id"])["status"]["state"]
                == "TASK_STATE_COMPLETED", f"the task {text!r} completes")
    return alice.tasks.get(None, task["id"])


async def test_tasks_go_on_across_normal_and_emergency_rotations(tmp_path: Path) -> None:
    bob_plugins = make_plugins(load_entry_points=False)
    bob_plugins.pm.register(Answers(), name="answers")
    async with AsyncExitStack() as stack:
        hub = HubProcess(tmp_path / "hub", free_port()).start()
        stack.callback(hub.stop)
        bob = await stack.enter_async_context(
            running_node(joined(tmp_path / "bob", hub.url), bob_plugins))
        alice = await stack.enter_async_context(running_node(joined(tmp_path / "alice", hub.url)))
        for node in (alice, bob):
            await until(lambda node=node: node.hub.status.state is JoinState.REGISTERED,
                        f"{node.aid} registered")
        bob.tasks.trust(alice.aid)
        first = await round_trip(alice, bob, "before")
        assert first["metadata"]["anet.receipt_verified"] is True

        assert (await rotate(alice, emergency=False))["keySeq"] == 1
        await until(lambda: alice.hub.status.state is JoinState.REGISTERED, "alice back")
        second = await round_trip(alice, bob, "after-alice-rotated")
        assert second["metadata"]["anet.receipt_verified"] is True

        assert (await rotate(bob, emergency=True))["keySeq"] == 1
        await until(lambda: bob.hub.status.state is JoinState.REGISTERED, "bob back")
        third = await round_trip(alice, bob, "after-bob-rotated")
        assert third["metadata"]["anet.receipt_verified"] is True
        assert alice.aid == alice.identity.aid and bob.identity.key_seq == 1
