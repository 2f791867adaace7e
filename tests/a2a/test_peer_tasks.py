"""Tasks at a direct peer that does not finish at once, against a real HTTP peer on loopback:
followed with GetTask, canceled while the peer holds them, and taken up after a restart."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from pydantic import SecretStr

from anet_a2a.config import PeerConfig
from anet_a2a.jws import CardSignatureCheck, SignatureState
from anet_a2a.peers.client import ClientPolicy, PeerClient
from anet_a2a.peers.discovery import DirectAgent
from anet_a2a.peers.guard import HostPolicy
from anet_a2a.peers.store import PeerTaskStore
from anet_a2a.peers.tasks import DirectTasks
from tests.support.processes import free_port
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(30)


class SlowPeer:
    """Answers SendMessage with a working task (or holds it for ``hold`` messages) and
    completes it on the second GetTask."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.polls = 0
        self.release = asyncio.Event()

    async def handle(self, request: web.Request) -> web.Response:
        call = await request.json()
        self.calls.append(call["method"])
        if call["method"] == "SendMessage":
            if call["params"]["message"]["parts"][0]["text"] == "hold":
                await self.release.wait()
            task = {"id": "remote-1", "contextId": "rc", "status": {
                "state": "TASK_STATE_WORKING"}}
        elif call["method"] == "GetTask":
            self.polls += 1
            done = self.polls >= 2
            task = {"id": call["params"]["id"], "contextId": "rc", "status": {
                "state": "TASK_STATE_COMPLETED" if done else "TASK_STATE_WORKING"}}
            if done:
                task["artifacts"] = [{"artifactId": "a", "parts": [{"text": "finally"}]}]
        else:
            task = {"id": call["params"]["id"], "contextId": "rc",
                    "status": {"state": "TASK_STATE_CANCELED"}}
        return web.json_response({"jsonrpc": "2.0", "id": call["id"], "result":
                                  task if call["method"] != "SendMessage" else {"task": task}})


@asynccontextmanager
async def peer_and_tasks(tmp_path: Path, peer: SlowPeer
                         ) -> AsyncIterator[tuple[DirectAgent, DirectTasks]]:
    port = free_port()
    app = web.Application()
    app.router.add_post("/rpc", peer.handle)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port).start()
    config = PeerConfig(name="slow", base_url=f"http://127.0.0.1:{port}", token=SecretStr(""))
    agent = DirectAgent(peer="slow", agent="agent", base_url=config.base_url,
                        rpc_url=f"{config.base_url}/rpc", card={"name": "agent"},
                        signature=CardSignatureCheck(SignatureState.ABSENT), source="card")
    client = PeerClient(ClientPolicy(HostPolicy(True), 100_000, 10.0))
    store = PeerTaskStore(tmp_path / "peer_tasks.db")
    tasks = DirectTasks(store, client, {"slow": config}, give_up_after_s=20)
    try:
        yield agent, tasks
    finally:
        peer.release.set()
        await tasks.close()
        store.close()
        await runner.cleanup()


def message(text: str, message_id: str = "m-1") -> dict[str, Any]:
    return {"messageId": message_id, "role": "ROLE_USER", "parts": [{"text": text}]}


async def test_an_unfinished_task_is_followed_until_it_ends(tmp_path: Path) -> None:
    peer = SlowPeer()
    async with peer_and_tasks(tmp_path, peer) as (agent, tasks):
        task = await tasks.send(agent, message("work"), None)
        events = [event async for event in tasks.subscribe(agent, task["id"])]
        assert events[-1]["statusUpdate"]["status"]["state"] == "TASK_STATE_COMPLETED"
        assert any("artifactUpdate" in event for event in events)
        final = tasks.get(agent, task["id"])
        assert final["artifacts"][0]["parts"][0]["text"] == "finally"
        assert final["metadata"]["anet.effect_status"] == "done"
        assert peer.calls == ["SendMessage", "GetTask", "GetTask"]


async def test_a_cancel_while_the_peer_holds_the_message(tmp_path: Path) -> None:
    peer = SlowPeer()
    async with peer_and_tasks(tmp_path, peer) as (agent, tasks):
        task = await tasks.send(agent, message("hold"), None)
        await eventually(lambda: peer.calls == ["SendMessage"], "the peer holds the message")
        canceled = await tasks.cancel(agent, task["id"])
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        assert canceled["metadata"]["anet.effect_status"] == "possible"
        peer.release.set()
        await asyncio.sleep(0.2)
        assert tasks.get(agent, task["id"])["status"]["state"] == "TASK_STATE_CANCELED"


async def test_after_a_restart_open_tasks_are_followed_or_failed(tmp_path: Path) -> None:
    peer = SlowPeer()
    async with peer_and_tasks(tmp_path, peer) as (agent, tasks):
        followed = await tasks.send(agent, message("work", "m-1"), None)
        await eventually(lambda: tasks.store.get(followed["id"]).remote_task_id,
                         "the peer answered")
        held = await tasks.send(agent, message("hold", "m-2"), None)
        await eventually(lambda: peer.calls.count("SendMessage") == 2, "the peer holds m-2")
        # The first poll comes after 0.5 s, completion after two: it is still open here.
        assert tasks.get(agent, followed["id"])["status"]["state"] == "TASK_STATE_WORKING"
        await tasks.close()  # the daemon stops
        peer.polls = 0
        restarted = DirectTasks(tasks.store, tasks.client, tasks.peers, give_up_after_s=20)
        restarted.recover({agent.id: agent})
        interrupted = restarted.get(agent, held["id"])
        assert interrupted["status"]["state"] == "TASK_STATE_FAILED"
        assert interrupted["metadata"]["anet.reason"] == "interrupted"
        await eventually(lambda: restarted.get(agent, followed["id"])["status"]["state"]
                    == "TASK_STATE_COMPLETED", "the followed task completes")
        await restarted.close()
