"""Sends while the hub is away (docs/cli.md, ``anet send``; docs/mcp.md, ``hub_unreachable``):
a task to an agent the node knows is held in its outbox and leaves when the hub is back; to an
agent it does not know, refused. A real hub process, SIGKILLed and started again, and alice
and bob as daemons, driven through the CLI and alice's local A2A endpoint (JSON-RPC)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from anet_core.settings import DataPaths
from tests.support.processes import HubProcess, NodeDir, free_port
from tests.support.waiting import STEP_TIMEOUT_S, wait_for

pytestmark = pytest.mark.timeout(180)

pytest.importorskip("anet_a2a")
from anet_a2a.state import StateDir  # noqa: E402

STRANGER = "b" * 32
"""An AID no node here has seen."""


@pytest.fixture
def network(tmp_path: Path) -> Iterator[tuple[HubProcess, NodeDir, NodeDir]]:
    """The hub; alice (with her local A2A endpoint) and bob, who trusts her."""
    hub = HubProcess(tmp_path / "hub", free_port()).start()
    alice, bob = NodeDir(tmp_path / "alice", disabled="mcp"), NodeDir(tmp_path / "bob",
                                                                      disabled="a2a,mcp")
    try:
        for node in (alice, bob):
            node.run("init")
            node.run("join", hub.url)
            node.run("up")
            node.wait_registered()
        bob.run("trust", "add", alice.aid)
        yield hub, alice, bob
    finally:
        for node in (alice, bob):
            node.stop()
        hub.stop()


def send_rpc(node: NodeDir, aid: str, text: str) -> dict[str, Any]:
    """JSON-RPC SendMessage to ``aid`` on ``node``'s local A2A endpoint: the answer."""
    state = StateDir.of(DataPaths(node.root))
    address = state.address_file.read_text().strip()
    token = state.token_file.read_text().strip()
    answer = httpx.post(f"http://{address}/a2a/v1/agents/{aid}/jsonrpc", timeout=STEP_TIMEOUT_S,
                        headers={"Authorization": f"Bearer {token}", "A2A-Version": "1.0"},
                        json={"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
                            "message": {"messageId": f"m-{text}", "role": "ROLE_USER",
                                        "parts": [{"text": text}]},
                            "configuration": {"returnImmediately": True}}})
    return dict(answer.json())


def test_a_send_while_the_hub_is_away_is_held_and_leaves_when_it_is_back(network) -> None:
    hub, alice, bob = network
    first = alice.json("send", bob.aid, "before")  # alice knows bob from now on
    wait_for(lambda: any(item["id"] == first["id"] for item in bob.json("inbox")),
             "the first task at bob")
    hub.kill()
    wait_for(lambda: alice.status()["hub"]["state"] == "unreachable", "alice sees the hub gone")

    held = alice.json("send", bob.aid, "while away")
    assert held["status"]["state"] == "TASK_STATE_SUBMITTED", held
    assert held["metadata"]["anet.reason"] == "hub_unreachable"
    assert "sent when the hub is back" in held["status"]["message"]["parts"][0]["text"]
    through_a2a = send_rpc(alice, bob.aid, "through a2a")["result"]["task"]
    assert through_a2a["metadata"]["anet.reason"] == "hub_unreachable", through_a2a
    refused = alice.run("send", STRANGER, "to a stranger", check=False)
    assert refused.returncode == 1 and "exchanged no task with " + STRANGER in refused.stderr
    assert send_rpc(alice, STRANGER, "to a stranger")["error"]["data"][0]["metadata"][
        "anet.reason"] == "hub-unavailable"

    bob.stop()  # the hub keeps what it takes for him meanwhile
    hub.start()
    held_ids = {held["id"], through_a2a["id"]}
    for task_id in held_ids:
        wait_for(lambda task_id=task_id: "anet.reason" not in alice.json(
            "task", task_id)["metadata"], "the hub took the message: the task waits no more",
                 60)
    bob.run("up")
    wait_for(lambda: held_ids <= {item["id"] for item in bob.json("inbox")},
             "the held tasks at bob")
    bob.run("reply", held["id"], "done")
    wait_for(lambda: alice.json("task", held["id"])["status"]["state"]
             == "TASK_STATE_COMPLETED", "the held task completed")
    assert [item["id"] for item in json.loads(
        alice.run("tasks", "--json").stdout)["tasks"]].count(held["id"]) == 1
