"""A task's state never goes backwards at the requester, and "working" is the module's word."""

from __future__ import annotations

from pathlib import Path

import pytest

from anet_core import hookimpl
from anet_core.records import InboundTask, TaskClaim
from anet_core.tasks import Responder
from tests.support.fakes import FakeHub
from tests.support.messages import user_message
from tests.support.nodes import open_node, plugins_with
from tests.support.waiting import eventually


def module(*, works_first: bool):
    class GivesUp:
        """Claims a task, then leaves it to the operator (as the backends module does with a
        backend its checks refuse), having said it works or not."""

        @hookimpl
        def anet_take_task(self, node, task: InboundTask) -> TaskClaim:
            async def serve(task: InboundTask, responder: Responder) -> None:
                if works_first:
                    await responder.working("on it")
                await responder.to_inbox("the backend's socket is not trusted")

            return TaskClaim(module="gives-up", serve=serve)

    return plugins_with(GivesUp())


@pytest.mark.parametrize(("works_first", "state", "updates"), [
    (False, "TASK_STATE_SUBMITTED", 1),  # given up at once: no WORKING went out before
    (True, "TASK_STATE_WORKING", 2),  # worked on, then handed over: it stays WORKING
])
async def test_a_task_handed_to_the_inbox_never_goes_backwards(
        tmp_path: Path, hub: FakeHub, works_first: bool, state: str, updates: int) -> None:
    async with open_node(tmp_path / "a", hub) as a, \
            open_node(tmp_path / "b", hub, plugins=module(works_first=works_first)) as b:
        b.tasks.trust(a.aid)
        task = await a.tasks.send(b.aid, user_message("hello"))
        await eventually(lambda: a.tasks.get(None, task["id"])["metadata"].get("anet.reason")
                         == "queued_for_operator")
        seen = a.tasks.get(None, task["id"])
        assert seen["status"]["state"] == state
        assert seen["metadata"]["anet.state_seq"] == updates
        assert [entry["id"] for entry in b.tasks.provider.inbox()] == [task["id"]]
