"""A real hub (`anet hub serve`) and two real daemons (`anet up`) on loopback, driven through the
real `anet` CLI in temporary data directories: send, inbox, reply, cancel, receipts, strangers,
restarts of all three processes mid-task, unregistered nodes and bad input."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.processes import HubProcess, NodeDir, free_port
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(180)


Network = tuple[HubProcess, NodeDir, NodeDir]


@pytest.fixture
def network(tmp_path: Path) -> Iterator[Network]:
    hub = HubProcess(tmp_path / "hub", free_port()).start()
    nodes = [NodeDir(tmp_path / name, disabled="a2a") for name in ("alice", "bob")]
    try:
        for node in nodes:
            node.run("init")
            node.run("join", hub.url)
            node.run("up")
            node.wait_registered()
        yield hub, nodes[0], nodes[1]
    finally:
        for node in nodes:
            node.stop()
        hub.stop()


def task_state(node: NodeDir, task_id: str) -> str:
    return node.json("task", task_id)["status"]["state"]


def test_send_inbox_reply_and_restarts(network: Network) -> None:
    hub, alice, bob = network
    bob.run("trust", "add", alice.aid)
    listed = [agent["aid"] for agent in alice.json("agents")["agents"]]
    assert bob.aid in listed and alice.aid not in listed
    task = alice.json("send", bob.aid, "summarize this")
    inbox = wait_for(lambda: bob.json("inbox"), "the task reached bob's inbox")
    assert inbox[0]["id"] == task["id"] and inbox[0]["peer"] == alice.aid
    assert "summarize this" in bob.run("inbox").stdout

    # Everyone restarts mid-task: nothing is lost.
    for process in (alice, bob):
        process.stop()
    hub.stop()
    hub.start()
    for node in (alice, bob):
        node.run("up")
        node.wait_registered()
    assert bob.json("inbox")[0]["id"] == task["id"]

    bob.run("reply", task["id"], "here is the summary")
    wait_for(lambda: task_state(alice, task["id"]) == "TASK_STATE_COMPLETED", "alice sees it done")
    done = alice.json("task", task["id"])
    assert done["artifacts"][0]["parts"] == [{"text": "here is the summary"}]
    assert done["metadata"]["anet.receipt_verified"] is True
    assert "here is the summary" in alice.run("task", task["id"]).stdout
    assert "reviewed" in alice.run("review", task["id"], "4", "quick and right").stdout
    [entry] = [agent for agent in alice.json("agents")["agents"] if agent["aid"] == bob.aid]
    assert entry["reviewCount"] == 1 and entry["avgRating"] == 4
    again = alice.run("review", task["id"], "1", check=False)
    assert again.returncode == 1 and "already posted" in again.stderr
    assert [t["id"] for t in alice.json("tasks")["tasks"]] == [task["id"]]
    assert "evidence chain OK" in bob.run("evidence", "verify").stdout


def test_stranger_multi_turn_wait_and_bad_input(network: Network) -> None:
    _, alice, bob = network
    stranger = alice.json("send", bob.aid, "let me in")
    wait_for(lambda: task_state(alice, stranger["id"]) == "TASK_STATE_REJECTED", "rejected")
    assert alice.json("task", stranger["id"])["metadata"]["anet.reason"] == "not_trusted"
    assert bob.json("inbox") == []

    bob.run("policy", "set", "open")
    assert "open" in bob.run("policy", "show").stdout
    task = alice.json("send", bob.aid, "book a table")
    wait_for(lambda: bob.json("inbox"), "the task reached bob")
    bob.run("reply", "--input-required", task["id"], "for how many?")
    wait_for(lambda: task_state(alice, task["id"]) == "TASK_STATE_INPUT_REQUIRED", "question")
    bob.run("reject", task["id"], "--reason", "fully booked")
    wait_for(lambda: task_state(alice, task["id"]) == "TASK_STATE_REJECTED", "declined")

    waited = alice.run("send", bob.aid, "quick one", "--wait", "--timeout", "1", check=False)
    assert waited.returncode == 3  # still waiting in bob's inbox
    waiting = alice.json("tasks")["tasks"][0]["id"]
    assert alice.run("cancel", waiting).stdout == f"task {waiting}: canceled\n"
    wait_for(lambda: waiting not in {item["id"] for item in bob.json("inbox")}, "bob stopped")
    again = alice.run("cancel", waiting, check=False)
    assert again.returncode == 1 and "already canceled" in again.stderr, again.stderr

    for args, needle in ((("send", "not-an-aid", "x"), "'not-an-aid' is not an AID"),
                         (("send", "a" * 32, "x"), "a" * 32),
                         (("task", "no-such-task"), "no-such-task"),
                         (("reply", "no-such-task", "x"), "no-such-task"),
                         (("trust", "add", "bad"), "'bad' is not an AID")):
        result = alice.run(*args, check=False)
        assert result.returncode == 1 and needle in result.stderr, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) <= 2  # one line and a hint


def test_unregistered_node_refuses_to_send(tmp_path: Path) -> None:
    lonely = NodeDir(tmp_path / "lonely", disabled="a2a")
    lonely.run("init")
    lonely.run("up")
    try:
        result = lonely.run("send", "b" * 32, "hello", check=False)
        assert result.returncode == 1 and "join" in result.stderr
        assert lonely.json("tasks")["tasks"] == []
    finally:
        lonely.stop()
