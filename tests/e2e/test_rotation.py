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
from tests.support.fakes import CompletingModule
from tests.support.messages import user_message
from tests.support.nodes import plugins_with, running_node
from tests.support.processes import HubProcess, free_port
from tests.support.waiting import eventually


async def rotate(node: Node, *, emergency: bool) -> dict[str, Any]:
    """``anet keys rotate`` as the CLI does it: through the daemon's control plane."""
    client = ControlClient(node.paths)
    return await asyncio.to_thread(client.post, "/tasks/keys/rotate", {"emergency": emergency})


async def round_trip(alice: Node, bob: Node, text: str) -> dict[str, Any]:
    task = await alice.tasks.send(bob.aid, user_message(text, f"m-{text}"))
    await eventually(lambda: alice.tasks.get(None, task["id"])["status"]["state"]
                     == "TASK_STATE_COMPLETED", f"the task {text!r} completes")
    return alice.tasks.get(None, task["id"])


async def test_tasks_go_on_across_normal_and_emergency_rotations(tmp_path: Path) -> None:
    bob_plugins = plugins_with(CompletingModule())
    async with AsyncExitStack() as stack:
        hub = HubProcess(tmp_path / "hub", free_port()).start()
        stack.callback(hub.stop)
        bob = await stack.enter_async_context(
            running_node(tmp_path / "bob", bob_plugins, hub_url=hub.url))
        alice = await stack.enter_async_context(running_node(tmp_path / "alice", hub_url=hub.url))
        bob.tasks.trust(alice.aid)
        first = await round_trip(alice, bob, "before")
        assert first["metadata"]["anet.receipt_verified"] is True

        assert (await rotate(alice, emergency=False))["keySeq"] == 1
        await eventually(lambda: alice.hub.status.state is JoinState.REGISTERED, "alice back")
        second = await round_trip(alice, bob, "after-alice-rotated")
        assert second["metadata"]["anet.receipt_verified"] is True

        assert (await rotate(bob, emergency=True))["keySeq"] == 1
        await eventually(lambda: bob.hub.status.state is JoinState.REGISTERED, "bob back")
        third = await round_trip(alice, bob, "after-bob-rotated")
        assert third["metadata"]["anet.receipt_verified"] is True
        assert alice.aid == alice.identity.aid and bob.identity.key_seq == 1
