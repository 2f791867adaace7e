"""A provider that restarts while a module serves a task tells the requester what became of it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from anet_core import hookimpl
from anet_core.records import InboundTask, TaskClaim
from anet_core.tasks import Responder
from anet_core.tasks.provider import RESTARTED_NOTE
from tests.support.fakes import FakeHub
from tests.support.messages import user_message
from tests.support.nodes import open_node, plugins_with
from tests.support.waiting import eventually


class Works:
    @hookimpl
    def anet_take_task(self, node, task: InboundTask) -> TaskClaim:
        async def serve(task: InboundTask, responder: Responder) -> None:
            await responder.working("thinking")
            await asyncio.Event().wait()  # until the node stops

        return TaskClaim(module="works", serve=serve)


def plugins_with_module():
    return plugins_with(Works())


async def test_a_task_held_at_a_restart_is_announced_as_waiting_for_the_operator(
        tmp_path: Path, hub: FakeHub) -> None:
    async with open_node(tmp_path / "a", hub) as a:
        async with open_node(tmp_path / "b", hub, plugins=plugins_with_module()) as b:
            b.tasks.trust(a.aid)
            task = await a.tasks.send(b.aid, user_message("hello"))
            await eventually(lambda: a.tasks.get(None, task["id"])["status"]["state"]
                             == "TASK_STATE_WORKING")
            events = a.tasks.subscribe(b.aid, task["id"])  # a blocking send waits like this
        async with open_node(tmp_path / "b", hub, plugins=plugins_with_module()) as b:
            async def reason_event() -> dict:
                async for event in events:
                    update = event.get("statusUpdate")
                    if update and update.get("metadata", {}).get("anet.reason"):
                        return update
                raise AssertionError("the stream ended without the provider's word")

            update = await asyncio.wait_for(reason_event(), 10)
            assert update["metadata"]["anet.reason"] == "queued_for_operator"
            assert update["status"]["message"]["parts"][0]["text"] == RESTARTED_NOTE
            seen = a.tasks.get(None, task["id"])
            assert seen["status"]["state"] == "TASK_STATE_WORKING"  # never backwards
            assert [entry["id"] for entry in b.tasks.provider.inbox()] == [task["id"]]
            events.close()
