"""``GET /tasks/task/<id>/events``: a task's events as server-sent events, read with the core's
AsyncControlClient from real daemons joined by a real hub."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from pathlib import Path

import pytest

from anet_core.control.client import AsyncControlClient
from anet_core.errors import AnetError
from anet_core.settings import DataPaths
from tests.support.processes import hub_and_nodes
from tests.support.waiting import STEP_TIMEOUT_S, eventually

pytestmark = pytest.mark.timeout(180)


async def test_events_of_a_task_until_it_ends(tmp_path: Path) -> None:
    with hub_and_nodes(tmp_path, "alice", "bob") as (_, (alice, bob)):
        bob.run("trust", "add", alice.aid)
        task = alice.json("send", bob.aid, "count these words")
        async with AsyncControlClient(DataPaths(alice.root)) as control:
            seen: list[dict] = []
            async with asyncio.timeout(STEP_TIMEOUT_S):
                async for event in control.events(f"/tasks/task/{task['id']}/events"):
                    seen.append(event)
                    # In bob's inbox: in the snapshot already, or as an update.
                    holder = event.get("task") or event.get("statusUpdate") or {}
                    if holder.get("metadata", {}).get("anet.reason") == "queued_for_operator":
                        await asyncio.to_thread(bob.run, "reply", task["id"], "three")
            assert seen[0]["task"]["id"] == task["id"]
            assert seen[0]["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
            artifact = next(event["artifactUpdate"] for event in seen if "artifactUpdate" in event)
            assert artifact["artifact"]["parts"] == [{"text": "three"}]
            last = seen[-1]["statusUpdate"]
            assert last["status"]["state"] == "TASK_STATE_COMPLETED"
            assert last["metadata"]["anet.receipt_verified"] is True

            # A finished task: its snapshot, then the end.
            async with aclosing(control.events(f"/tasks/task/{task['id']}/events")) as again:
                assert [event async for event in again][0]["task"]["status"]["state"] == \
                    "TASK_STATE_COMPLETED"

            with pytest.raises(AnetError) as unknown:
                async for _ in control.events("/tasks/task/no-such-task/events"):
                    pass
            assert unknown.value.reason == "task-not-found"
            assert "no-such-task" in unknown.value.message

            # A reader that leaves changes nothing; the daemon stopping ends the stream.
            pending = alice.json("send", bob.aid, "wait for me")
            async with aclosing(control.events(f"/tasks/task/{pending['id']}/events")) as events:
                await anext(events)
            assert alice.json("task", pending["id"])["status"]["state"] != "TASK_STATE_CANCELED"
            async with aclosing(control.events(f"/tasks/task/{pending['id']}/events")) as events:
                await anext(events)
                stopping = asyncio.create_task(asyncio.to_thread(alice.run, "stop"))
                async with asyncio.timeout(STEP_TIMEOUT_S):
                    rest = [event async for event in events]
                await stopping
            assert all("statusUpdate" not in event or event["statusUpdate"]["status"]["state"]
                       == "TASK_STATE_SUBMITTED" for event in rest)
            await eventually(lambda: not alice.root.joinpath("control_addr.txt").exists(),
                        "alice's daemon stopped")
