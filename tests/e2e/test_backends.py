"""Backends end to end: a real hub (`anet hub serve`), a real provider daemon B (`anet up`, its
backends module configured inside modules.a2a, with the a2a module left out)
and requester nodes A (trusted by B) and Carol (a stranger) running their real task layers in this
process, with backends served by the official a2a-sdk 1.x server on unix sockets.

One hub, one B and the two backends serve the whole module (they are slow to start); the tests
run in file order and each leaves B as the next expects it. Every wait has a deadline.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from anet_core.link import JoinState, SearchQuery
from anet_core.node import Node
from anet_core.settings import DataPaths
from tests.support.nodes import running_node
from tests.support.processes import HubProcess, anet_async, free_port
from tests.support.sdk_backend import TOKEN, Seen, sdk_backend
from tests.support.waiting import eventually

pytest.importorskip("anet_backends")

pytestmark = [pytest.mark.timeout(120), pytest.mark.asyncio(loop_scope="module")]

COMPLETED = "TASK_STATE_COMPLETED"


# --- processes ---------------------------------------------------------------------------------


async def anet(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """The real ``anet`` for the data directory ``root`` (the backends and nodes A and Carol
    run in this loop)."""
    return await anet_async(root, *args, check=check, disabled="a2a")


# --- the network -------------------------------------------------------------------------------


@dataclass
class Provider:
    """Node B: a daemon whose backends module forwards to the two SDK backends."""

    root: Path
    aid: str
    streaming_url: str
    blocking_url: str
    token_file: Path

    def configure(self, *, untrusted_backend: bool) -> None:
        """``*`` → the streaming backend; ``chat`` → the blocking one, which also serves
        strangers (accept_untrusted + toolless), unless ``untrusted_backend`` is False."""
        backends: list[dict[str, Any]] = [
            {"match": "*", "url": self.streaming_url, "token_file": str(self.token_file)}]
        if untrusted_backend:
            backends.append({"match": "chat", "url": self.blocking_url,
                             "token_file": str(self.token_file), "accept_untrusted": True,
                             "toolless": True})
        config = json.loads((self.root / "config.json").read_text())
        config["modules"] = {"a2a": {"backends": backends,
                                     "retry": {"max_interval": "1s", "give_up_after": "0"}}}
        (self.root / "config.json").write_text(json.dumps(config, indent=2))

    async def up(self) -> None:
        await anet(self.root, "up")
        await eventually(self.registered, "B registered at the hub")

    async def stop(self) -> None:
        await anet(self.root, "stop", check=False)

    async def registered(self) -> bool:
        status = json.loads((await anet(self.root, "status", "--json")).stdout)
        return status.get("hub", {}).get("state") == "registered"

    async def json(self, *args: str) -> Any:
        return json.loads((await anet(self.root, *args, "--json")).stdout)

    def evidence(self, kind: str) -> list[dict[str, Any]]:
        chain = DataPaths(self.root).evidence_chain
        lines = chain.read_text().splitlines() if chain.exists() else []
        return [record["data"] for record in map(json.loads, lines) if record["kind"] == kind]

    async def recorded(self, kind: str, match: Callable[[dict[str, Any]], bool]
                       ) -> list[dict[str, Any]]:
        """The records of ``kind`` that ``match``, once there is one: the daemon appends its
        records a moment after the change they describe (docs/performance.md)."""
        return await eventually(lambda: [data for data in self.evidence(kind) if match(data)],
                                f"B recorded {kind}")


@dataclass
class Network:
    b: Provider
    a: Node
    carol: Node
    streaming: Seen
    blocking: Seen

    async def send(self, sender: Node, text: str, *, skill: str | None = None,
                   **ids: str) -> dict[str, Any]:
        message = {"messageId": f"m-{uuid.uuid4().hex}", "role": "ROLE_USER",
                   "parts": [{"text": text}], **ids}
        return await sender.tasks.send(self.b.aid, message, skill=skill)

    async def reaches(self, sender: Node, task_id: str, *states: str) -> dict[str, Any]:
        await eventually(lambda: sender.tasks.get(None, task_id)["status"]["state"] in states,
                         f"task {task_id} reaches {' or '.join(states)}")
        return sender.tasks.get(None, task_id)


async def requester(root: Path, hub_url: str, stack: AsyncExitStack) -> Node:
    await anet(root, "init")
    await anet(root, "join", hub_url)
    node = await stack.enter_async_context(running_node(root))
    await eventually(lambda: node.hub.status.state is JoinState.REGISTERED,
                     f"{root.name} registered")
    return node


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def net(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Network]:
    tmp = tmp_path_factory.mktemp("backends-e2e")
    sockets = Path("/tmp") / f"anet-e2e-{uuid.uuid4().hex[:8]}"  # sun_path is short
    sockets.mkdir(mode=0o700)
    token_file = tmp / "a2a.token"
    token_file.write_text(TOKEN + "\n")
    token_file.chmod(0o600)
    port = free_port()
    hub_url = f"ws://127.0.0.1:{port}"
    b_root = tmp / "bob"
    async with AsyncExitStack() as stack:
        stack.callback(shutil.rmtree, sockets, True)
        streaming = await stack.enter_async_context(
            sdk_backend(sockets / "stream.sock", streaming=True, token=TOKEN))
        blocking = await stack.enter_async_context(
            sdk_backend(sockets / "block.sock", streaming=False, token=TOKEN))
        hub = HubProcess(tmp / "hub", port).start()
        stack.callback(hub.stop)
        await anet(b_root, "init")
        await anet(b_root, "join", hub_url)
        b = Provider(b_root, json.loads((await anet(b_root, "status", "--json")).stdout)["aid"],
                     f"unix://{sockets}/stream.sock", f"unix://{sockets}/block.sock", token_file)
        b.configure(untrusted_backend=True)
        stack.push_async_callback(b.stop)
        await b.up()
        a = await requester(tmp / "alice", hub_url, stack)
        carol = await requester(tmp / "carol", hub_url, stack)
        await anet(b_root, "trust", "add", a.aid)
        yield Network(b, a, carol, streaming, blocking)


def texts(task: dict[str, Any]) -> list[str]:
    return [part["text"] for artifact in task.get("artifacts", []) for part in artifact["parts"]]


# --- the tests ---------------------------------------------------------------------------------


async def test_the_card_lists_the_skills_of_the_backends(net: Network) -> None:
    # "*" → the streaming SDK backend, whose card offers "echo"; "chat" → its own skill.
    async def listed() -> dict[str, Any] | None:
        net.a.hub.forget_peer()
        page = await net.a.hub.search(SearchQuery(skill="echo"))
        return next((peer.card for peer in page.peers if peer.aid == net.b.aid), None)

    card = await eventually(listed, "B's card lists its backend's skill")
    ids = [skill["id"] for skill in card["skills"]]
    assert ids == ["echo", "chat"]


async def test_a_plain_reply_and_its_artifacts(net: Network) -> None:
    task = await net.send(net.a, "two please")
    done = await net.reaches(net.a, task["id"], COMPLETED)
    assert texts(done) == ["first", "echo: two please"]
    assert done["metadata"]["anet.receipt_verified"] is True
    assert done["metadata"]["anet.effect_status"] == "done"
    seen = net.streaming.messages[-1]
    assert seen["messageId"] == task["history"][0]["messageId"]  # unchanged
    assert seen["contextId"] == task["contextId"]  # the requester's context is the backend's
    assert net.streaming.metadata[-1] == {"anet.peer_aid": net.a.aid, "anet.trusted": True}
    assert set(net.streaming.authorizations) == {f"Bearer {TOKEN}"}
    forwarded = await net.b.recorded("backends.forwarded",
                                     lambda data: data["taskId"] == task["id"])
    assert forwarded[0]["backend"] == "*" and forwarded[0]["peer"] == net.a.aid
    assert forwarded[0]["backendTaskId"] == seen["taskId"]

    plain = await net.send(net.a, "hello")
    assert texts(await net.reaches(net.a, plain["id"], COMPLETED)) == ["echo: hello"]


async def test_an_input_required_turn_continues_the_same_backend_task(net: Network) -> None:
    task = await net.send(net.a, "ask me")
    asked = await net.reaches(net.a, task["id"], "TASK_STATE_INPUT_REQUIRED")
    assert asked["status"]["message"]["parts"] == [{"text": "which colour?"}]
    await net.send(net.a, "blue", taskId=task["id"])
    done = await net.reaches(net.a, task["id"], COMPLETED)
    assert texts(done) == ["echo: blue"]
    question, answer = net.streaming.messages[-2:]
    assert (question["text"], answer["text"]) == ("ask me", "blue")
    assert answer["taskId"] == question["taskId"]
    assert answer["contextId"] == question["contextId"] == task["contextId"]


async def test_a_cancel_reaches_the_backend_task(net: Network) -> None:
    task = await net.send(net.a, "slow job")
    # B reported the backend's own "working", so it knows the backend task
    await eventually(lambda: net.a.tasks.get(None, task["id"])["status"]["state"]
                     == "TASK_STATE_WORKING", "the backend works on the task")
    backend_task = net.streaming.messages[-1]["taskId"]
    assert net.streaming.messages[-1]["text"] == "slow job"
    await net.a.tasks.cancel(net.b.aid, task["id"])
    await eventually(lambda: backend_task in net.streaming.canceled, "the backend task is canceled")

    async def canceled_at_b() -> bool:
        received = await net.b.json("task", task["id"])
        return received["status"]["state"] == "TASK_STATE_CANCELED"

    await eventually(canceled_at_b, "B's task is canceled")
    assert net.a.tasks.get(None, task["id"])["status"]["state"] == "TASK_STATE_CANCELED"


async def test_a_strangers_task_is_forwarded_only_to_an_accept_untrusted_toolless_backend(
        net: Network) -> None:
    served = await net.send(net.carol, "hello from carol", skill="chat")
    done = await net.reaches(net.carol, served["id"], COMPLETED)
    assert texts(done) == ["echo: hello from carol"]
    assert net.blocking.metadata[-1] == {"anet.peer_aid": net.carol.aid, "anet.trusted": False}

    refused = await net.send(net.carol, "and the main agent?")
    rejected = await net.reaches(net.carol, refused["id"], "TASK_STATE_REJECTED")
    assert rejected["metadata"]["anet.reason"] == "not_trusted"
    assert "and the main agent?" not in [m["text"] for m in net.streaming.messages]
    assert await net.b.json("inbox") == []


async def test_the_open_policy_is_refused_naming_the_backend(net: Network) -> None:
    refused = await anet(net.b.root, "policy", "set", "open", check=False)
    assert refused.returncode == 1
    assert "backends[1].accept_untrusted (match 'chat')" in refused.stderr
    assert "inbound policy: trusted" in (await anet(net.b.root, "policy", "show")).stdout


async def test_a_follow_up_after_b_restarts_starts_a_new_backend_task_in_the_context(
        net: Network) -> None:
    task = await net.send(net.a, "ask again")
    await net.reaches(net.a, task["id"], "TASK_STATE_INPUT_REQUIRED")
    first = net.streaming.messages[-1]
    await net.b.stop()
    # sent while B is down: the hub keeps it, B takes it once its backends run again
    answer = await net.send(net.a, "green", taskId=task["id"])
    await net.b.up()
    done = await net.reaches(net.a, task["id"], COMPLETED)
    assert texts(done) == ["echo: green"]
    again = net.streaming.messages[-1]
    assert again["text"] == "green"
    assert again["messageId"] == answer["history"][-1]["messageId"]
    assert again["contextId"] == first["contextId"] == task["contextId"]
    assert again["taskId"] != first["taskId"]  # the mapping did not survive the restart
    await net.b.recorded("task.resumed", lambda data: data["taskId"] == task["id"]
                         and data["module"] == "backends")
    await net.b.recorded("backends.forwarded", lambda data: data["taskId"] == task["id"]
                         and data["backendTaskId"] == again["taskId"])


async def test_under_the_open_policy_a_strangers_task_waits_in_the_inbox(net: Network) -> None:
    await net.b.stop()
    net.b.configure(untrusted_backend=False)
    await net.b.up()
    await anet(net.b.root, "policy", "set", "open")
    task = await net.send(net.carol, "open door", skill="chat")
    inbox = await eventually(lambda: net.b.json("inbox"), "the task waits in B's inbox")
    assert [entry["id"] for entry in inbox] == [task["id"]]
    await eventually(lambda: net.carol.tasks.get(None, task["id"])["metadata"].get("anet.reason")
                     == "queued_for_operator", "Carol sees it queued")
    assert "open door" not in [m["text"] for m in net.streaming.messages + net.blocking.messages]

    # A backend that serves strangers cannot come back while the policy is open.
    await net.b.stop()
    net.b.configure(untrusted_backend=True)
    refused = await anet(net.b.root, "up", check=False)
    assert refused.returncode != 0
    assert "backends[1].accept_untrusted (match 'chat')" in refused.stderr
    assert "policy open" in refused.stderr

