"""A hub whose storage is full: the sender's task says so while its message waits, and goes
on once the hub takes it."""

from __future__ import annotations

from pathlib import Path

from tests.support.fakes import FakeHub
from tests.support.messages import user_message
from tests.support.nodes import open_node
from tests.support.waiting import eventually


async def test_the_task_says_the_hub_is_full_and_goes_on_when_it_has_room(
        tmp_path: Path, hub: FakeHub) -> None:
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        b.tasks.trust(a.aid)
        hub.refuse = "hub-storage-full"
        task = await a.tasks.send(b.aid, user_message("hello"))
        waiting = await eventually(lambda: (seen := a.tasks.get(None, task["id"]))["metadata"]
                                   .get("anet.reason") == "hub_storage_full" and seen)
        assert waiting["status"]["state"] == "TASK_STATE_SUBMITTED"
        assert "sent again when the hub has room" in \
            waiting["status"]["message"]["parts"][0]["text"]
        hub.refuse = None
        await eventually(lambda: b.tasks.provider.inbox(), timeout=10)
        await eventually(lambda: a.tasks.get(None, task["id"])["metadata"].get("anet.reason")
                         == "queued_for_operator", timeout=10)
