"""Tasks a module's surface hands in (``TaskLayer.local``): through the provider pipeline like
network tasks (modules, inbox, evidence), answered by events, never by an envelope."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest

from anet_core import hookimpl
from anet_core.plugins import make_plugins
from anet_core.records import InboundTask, TaskClaim
from anet_core.tasks import LocalOrigin, Responder, TaskError
from anet_core.tasks.origin import is_local_peer
from tests.support.fakes import FakeHub
from tests.support.messages import user_message as text
from tests.support.nodes import open_node
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(60)

ORIGIN = LocalOrigin("a2a", "triage/alice", {"anet.publish_alias": "triage",
                                              "anet.publish_token": "alice"})


class Desk:
    """Serves tasks of the skill ``desk``: ``ask`` asks for input first; ``hold`` waits."""

    def __init__(self) -> None:
        self.offered: list[InboundTask] = []

    @hookimpl
    def anet_take_task(self, node: Any, task: InboundTask) -> TaskClaim | None:
        self.offered.append(task)
        if task.skill != "desk":
            return None

        async def serve(task: InboundTask, responder: Responder) -> None:
            words = task.message["parts"][0]["text"]
            if words == "hold":
                await responder.working()
                await responder.cancelled.wait()
                return
            if words == "ask":
                await responder.input_required("which one?")
                words = (await responder.next_message())["parts"][0]["text"]
            await responder.artifact("partial", last_chunk=False)
            await responder.complete(artifacts=[f"done: {words}"])

        return TaskClaim(module="desk", serve=serve)


def plugins(desk: Desk) -> Any:
    loaded = make_plugins(load_entry_points=False)
    loaded.pm.register(desk, name="desk")
    return loaded


def state(task: dict[str, Any]) -> str:
    return str(task["status"]["state"])


async def test_a_local_task_goes_to_the_modules_and_its_events_to_subscribers(
        tmp_path: Path) -> None:
    desk = Desk()
    hub = FakeHub()
    async with open_node(tmp_path / "n", hub, plugins=plugins(desk)) as node:
        local = node.tasks.local(ORIGIN)
        task = await local.send(text("ask", "m-1"), skill="desk", metadata={"k": "v"})
        offered = desk.offered[0]
        assert is_local_peer(offered.peer_aid) and offered.peer_aid == "local:a2a:triage/alice"
        assert offered.trusted and offered.metadata == {"k": "v"}
        assert offered.origin == ORIGIN.metadata
        await eventually(lambda: state(local.get(task["id"])) == "TASK_STATE_INPUT_REQUIRED")
        subscription = local.subscribe(task["id"])
        answered = await local.send(text("this one", "m-2", taskId=task["id"]))
        assert answered["id"] == task["id"]
        events = [event async for event in subscription]
        assert "task" in events[0]
        assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        artifacts = [event["artifactUpdate"]["artifact"]["parts"][0]["text"]
                     for event in events if "artifactUpdate" in event]
        assert artifacts[-1] == "done: this one"
        final = local.get(task["id"])
        assert final["metadata"]["anet.origin"] == ORIGIN.metadata
        # Nothing was sealed for the hub, and the evidence chain has the task.
        assert node.store.outbox_due(float("inf")) == [] and hub.seen == []

        def kinds() -> list[str]:  # the chain is written a moment after the task's changes
            if not node.evidence.path.exists():
                return []
            return [json.loads(line)["kind"]
                    for line in node.evidence.path.read_text().splitlines()]

        await eventually(lambda: "task.answered" in kinds())
        assert "task.accepted" in kinds()


async def test_repeats_ownership_inbox_cancel_and_the_closed_policy(tmp_path: Path) -> None:
    desk = Desk()
    async with open_node(tmp_path / "n", FakeHub(), plugins=plugins(desk)) as node:
        local = node.tasks.local(ORIGIN)
        first = await local.send(text("hold", "m-1", contextId="c-1"), skill="desk")
        again = await local.send(text("hold", "m-1", contextId="c-1"), skill="desk")
        assert again["id"] == first["id"] and len(desk.offered) == 1
        other = node.tasks.local(LocalOrigin("a2a", "triage/bob"))
        with pytest.raises(TaskError) as caught:
            other.get(first["id"])
        assert caught.value.reason == "task-not-found"
        assert [task["id"] for task in local.list()["tasks"]] == [first["id"]]
        assert other.list()["tasks"] == []
        await eventually(lambda: state(local.get(first["id"])) == "TASK_STATE_WORKING")
        canceled = await local.cancel(first["id"])
        assert state(canceled) == "TASK_STATE_CANCELED"
        with pytest.raises(TaskError):
            await local.cancel(first["id"])

        waiting = await local.send(text("for the operator", "m-2"), skill="desk", offer=False)
        assert len(desk.offered) == 1, "a task for the inbox is not offered to the modules"
        assert waiting["metadata"]["anet.reason"] == "queued_for_operator"
        assert [task["id"] for task in node.tasks.inbox()] == [waiting["id"]]
        subscription = local.subscribe(waiting["id"])
        await node.tasks.reply(waiting["id"], "the operator's answer")
        events = [event async for event in subscription]
        assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"

        node.tasks.set_policy("closed")
        refused = await local.send(text("anyone there?", "m-3"), skill="desk")
        assert state(refused) == "TASK_STATE_REJECTED"
        assert refused["metadata"]["anet.reason"] == "rejected_by_policy"
        with pytest.raises(TaskError) as caught:
            await local.send(text("bad", "m-4", taskId="no-such-task-id"))
        assert caught.value.reason == "task-not-found"
        await asyncio.sleep(0)
