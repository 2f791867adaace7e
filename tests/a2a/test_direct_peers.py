"""Direct peers in real processes: an anet daemon that joined no hub, peering with a
ZeroClaw-shaped deployment (tests/a2a/zeroclaw_peer.py) and with an official a2a-sdk server
(examples.tck_agent on a loopback port); local clients use the official a2a-sdk client on the
node's local endpoint, with no code of their own for direct peers."""

from __future__ import annotations

import json
import os
import secrets
import shutil
import subprocess
import sys
import tempfile
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import (
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    TaskState,
)

from tests.support.processes import REPO, NodeDir, free_port, listening, stop_process
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(120)
CALL_TIMEOUT_S = 30


@dataclass
class Deployment:
    node: NodeDir
    address: str
    token: str
    zeroclaw_log: Path

    def url(self, agent: str) -> str:
        return f"http://{self.address}/a2a/v1/agents/{agent}"

    @property
    def headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}"}

    def zeroclaw_requests(self) -> list[dict[str, Any]]:
        if not self.zeroclaw_log.exists():
            return []
        return [json.loads(line) for line in self.zeroclaw_log.read_text().splitlines()]


def _start(args: list[str], log: Path) -> subprocess.Popen[bytes]:
    with open(log, "ab") as out:
        return subprocess.Popen([sys.executable, "-m", *args], stdout=out, stderr=out, cwd=REPO,
                                start_new_session=True)


@pytest.fixture(scope="module")
def deployment() -> Iterator[Deployment]:
    root = Path(tempfile.mkdtemp(prefix="anet-peers-"))
    processes: list[subprocess.Popen[bytes]] = []
    node = NodeDir(root / "node", disabled="backends")
    saved = os.environ.get("ZC_TOKEN")
    try:
        zc_token, sdk_token = secrets.token_urlsafe(16), secrets.token_urlsafe(16)
        (root / "zc.token").write_text(zc_token)
        (root / "sdk.token").write_text(sdk_token)
        zc_port, sdk_port = free_port(), free_port()
        processes.append(_start(["tests.a2a.zeroclaw_peer", "--port", str(zc_port),
                                 "--token-file", str(root / "zc.token"),
                                 "--log", str(root / "zc.jsonl")], root / "zc.log"))
        processes.append(_start(["examples.tck_agent", "--port", str(sdk_port),
                                 "--token-file", str(root / "sdk.token")], root / "sdk.log"))
        for port in (zc_port, sdk_port):
            wait_for(lambda port=port: listening(port), f"a peer listens on {port}")
        node.run("init")
        node.configure(a2a={
            "peers": [
                {"name": "zc", "base_url": f"http://127.0.0.1:{zc_port}",
                 "token": "${ZC_TOKEN}", "tags": ["triage"]},
                {"name": "zcbad", "base_url": f"http://127.0.0.1:{zc_port}",
                 "token": "not-the-token"},
                {"name": "sdk", "base_url": f"http://127.0.0.1:{sdk_port}", "token": sdk_token,
                 "tags": ["triage"]},
            ],
            "allowed_private_hosts": ["127.0.0.1"],
            "request_timeout_secs": 20})
        os.environ["ZC_TOKEN"] = zc_token  # the daemon reads it at each call
        node.run("up")
        state = node.root / "modules" / "a2a"
        wait_for(lambda: (state / "a2a_addr.txt").exists(), "the local endpoint has an address")
        yield Deployment(node=node, address=(state / "a2a_addr.txt").read_text().strip(),
                         token=(state / "a2a_token.txt").read_text().strip(),
                         zeroclaw_log=root / "zc.jsonl")
    finally:
        node.stop()
        for process in processes:
            stop_process(process)
        if saved is None:
            os.environ.pop("ZC_TOKEN", None)
        else:
            os.environ["ZC_TOKEN"] = saved
        shutil.rmtree(root, ignore_errors=True)


def user(text: str, **ids: Any) -> Message:
    ids.setdefault("message_id", f"m-{uuid.uuid4().hex}")
    return Message(role=Role.ROLE_USER, parts=[Part(text=text)], **ids)


async def listed(deployment: Deployment) -> dict[str, dict[str, Any]]:
    async with httpx.AsyncClient(headers=deployment.headers, timeout=CALL_TIMEOUT_S) as http:
        async def agents() -> dict[str, dict[str, Any]] | None:
            response = await http.get(f"http://{deployment.address}/a2a/v1/agents")
            found = {entry["aid"]: entry for entry in response.json()["agents"]}
            return found if len(found) >= 5 else None

        from tests.support.waiting import eventually
        result: dict[str, dict[str, Any]] = await eventually(agents, "the direct peers are listed")
        return result


async def test_the_catalog_and_the_single_card_are_on_the_local_endpoint(
        deployment: Deployment) -> None:
    agents = await listed(deployment)
    assert set(agents) == {"agent_alpha@zc", "agent_beta@zc", "agent_alpha@zcbad",
                           "agent_beta@zcbad", "tck-scenario-agent@sdk"}
    alpha = agents["agent_alpha@zc"]
    assert alpha["url"] == deployment.url("agent_alpha@zc")
    assert alpha["anet.directPeer"] == {"peer": "zc", "baseUrl": alpha["anet.directPeer"]
                                        ["baseUrl"], "tls": False, "signature": "absent"}
    async with httpx.AsyncClient(headers=deployment.headers, timeout=CALL_TIMEOUT_S) as http:
        card = (await http.get(alpha["cardUrl"])).json()
    assert card["name"] == "agent_alpha"
    assert [skill["id"] for skill in card["skills"]] == ["zeroclaw", "changelog-generation"]
    assert [i["url"] for i in card["supportedInterfaces"]] == [
        deployment.url("agent_alpha@zc") + "/jsonrpc", deployment.url("agent_alpha@zc") + "/rest"]
    assert card["capabilities"]["streaming"] is True
    assert card["signatures"], "the proxy card is signed by the node"
    extension = next(e for e in card["capabilities"]["extensions"]
                     if e["uri"] == "urn:anet:a2a:direct-peer/v1")
    assert extension["params"]["source"] == "catalog"


async def test_anet_agents_lists_the_direct_peers(deployment: Deployment) -> None:
    zc_base = (await listed(deployment))["agent_alpha@zc"]["anet.directPeer"]["baseUrl"]
    page = deployment.node.json("agents")
    agents = {entry["aid"]: entry for entry in page["agents"]}
    assert set(agents) == {"agent_alpha@zc", "agent_beta@zc", "agent_alpha@zcbad",
                           "agent_beta@zcbad", "tck-scenario-agent@sdk"}
    alpha = agents["agent_alpha@zc"]
    assert (alpha["source"], alpha["directPeer"], alpha["name"]) == ("a2a", "zc", "agent_alpha")
    assert alpha["url"].startswith(zc_base)
    assert [skill["id"] for skill in alpha["skills"]] == ["zeroclaw", "changelog-generation"]
    assert "hubError" in page  # this node joined no hub: its agents are listed all the same
    # The filters of the local endpoint's listing: a tag of the peer or of a skill.
    triage = {entry["aid"] for entry in deployment.node.json("agents", "--tag", "triage")
              ["agents"]}
    assert triage == {"agent_alpha@zc", "agent_beta@zc", "agent_beta@zcbad",
                      "tck-scenario-agent@sdk"}
    plain = deployment.node.run("agents", "--skill", "changelog-generation")
    lines = plain.stdout.splitlines()
    assert lines[0].split() == ["peer:zc", "agent_alpha@zc", alpha["url"], "agent_alpha"]
    assert lines[1] == "    skills: zeroclaw, changelog-generation"
    assert "peer:zcbad  agent_alpha@zcbad" in plain.stdout
    assert "the hub's directory is not listed" in plain.stderr


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
@pytest.mark.parametrize("streaming", [False, True])
async def test_a_zeroclaw_agent_answers_through_the_local_endpoint(
        deployment: Deployment, binding: str, streaming: bool) -> None:
    await listed(deployment)
    async with httpx.AsyncClient(headers=deployment.headers, timeout=CALL_TIMEOUT_S) as http:
        client = await ClientFactory(ClientConfig(
            httpx_client=http, streaming=streaming,
            supported_protocol_bindings=[binding])).create_from_url(
            deployment.url("agent_alpha@zc"))
        message = user("Reply with PONG")
        events = [event async for event in client.send_message(SendMessageRequest(
            message=message))]
        kinds = [event.WhichOneof("payload") for event in events]
        assert kinds[0] == "task"
        task_id = events[0].task.id
        task = await client.get_task(GetTaskRequest(id=task_id))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.artifacts[0].parts[0].text == "PONG"
        assert task.context_id and not task.context_id.startswith("a2a_agent_alpha_")
        # The same (contextId, messageId) again: the same task, nothing sent to the peer.
        sent = len([r for r in deployment.zeroclaw_requests() if r["method"] == "POST"])
        again = [event async for event in client.send_message(SendMessageRequest(
            message=user("Reply with PONG", message_id=message.message_id,
                         context_id=task.context_id)))]
        assert again[0].task.id == task_id
        assert len([r for r in deployment.zeroclaw_requests() if r["method"] == "POST"]) == sent
        page = await client.list_tasks(ListTasksRequest(page_size=100))
        assert task_id in [listed_task.id for listed_task in page.tasks]
        await client.close()


async def rpc(deployment: Deployment, agent: str, method: str, params: Any) -> dict[str, Any]:
    async with httpx.AsyncClient(headers={**deployment.headers, "A2A-Version": "1.0"},
                                 timeout=CALL_TIMEOUT_S) as http:
        response = await http.post(deployment.url(agent) + "/jsonrpc", json={
            "jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        assert response.status_code == 200
        answer: dict[str, Any] = response.json()
        return answer


async def failed_task(deployment: Deployment, agent: str, message: dict[str, Any]
                      ) -> dict[str, Any]:
    answer = await rpc(deployment, agent, "SendMessage", {"message": message})
    task: dict[str, Any] = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_FAILED", task
    return task


async def test_the_zeroclaw_errors_are_mapped(deployment: Deployment) -> None:
    await listed(deployment)
    unauthorized = await failed_task(deployment, "agent_alpha@zcbad", {
        "messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "hi"}]})
    assert unauthorized["metadata"]["anet.reason"] == "peer_unauthorized"
    assert "not-the-token" not in json.dumps(unauthorized)
    no_text = await failed_task(deployment, "agent_alpha@zc", {
        "messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"data": {"x": 1}}]})
    assert no_text["metadata"]["anet.reason"] == "peer_invalid_params"
    assert no_text["metadata"]["anet.peer_error"] == {"error": "peer-rpc-error",
                                                      "code": -32602}
    assert "message has no text parts" in no_text["status"]["message"]["parts"][0]["text"]
    # Cancel of a completed task is refused here; ZeroClaw is not asked (it knows no CancelTask).
    done = await rpc(deployment, "agent_beta@zc", "SendMessage", {"message": {
        "messageId": uuid.uuid4().hex, "role": "ROLE_USER", "parts": [{"text": "triage #1"}]}})
    task = done["result"]["task"]
    assert task["artifacts"][0]["parts"][0]["text"] == "agent_beta: triage #1"
    refused = await rpc(deployment, "agent_beta@zc", "CancelTask", {"id": task["id"]})
    assert refused["error"]["code"] == -32002
    # A task of one agent is no task of another (task ownership).
    other = await rpc(deployment, "agent_alpha@zc", "GetTask", {"id": task["id"]})
    assert other["error"]["code"] == -32001
    unknown = await rpc(deployment, "nobody@zc", "GetTask", {"id": task["id"]})
    assert unknown["error"]["code"] == -32601


async def test_an_a2a_sdk_server_is_a_direct_peer(deployment: Deployment) -> None:
    await listed(deployment)
    async with httpx.AsyncClient(headers=deployment.headers, timeout=CALL_TIMEOUT_S) as http:
        client = await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(
            deployment.url("tck-scenario-agent@sdk"))
        events = [event async for event in client.send_message(SendMessageRequest(
            message=Message(role=Role.ROLE_USER, message_id=f"tck-complete-task-{uuid.uuid4()}",
                            parts=[Part(text="hello")])))]
        task_id = events[0].task.id
        task = await client.get_task(GetTaskRequest(id=task_id))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        # A peer that answers with a Message: the local client gets that Message.
        events = [event async for event in client.send_message(SendMessageRequest(
            message=Message(role=Role.ROLE_USER,
                            message_id=f"tck-message-response-{uuid.uuid4()}",
                            parts=[Part(text="hello")])))]
        assert [event.WhichOneof("payload") for event in events] == ["message"]
        await client.close()
    status = deployment.node.run("doctor", check=False).stdout
    assert "a2a-peer-sdk" in status and "a2a-peer-zc " in status


def oncall(deployment: Deployment, incident: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "examples.oncall", "--json", incident],
                          env={**os.environ, "ANET_DATA_DIR": str(deployment.node.root)},
                          capture_output=True, text=True, timeout=CALL_TIMEOUT_S * 2, cwd=REPO,
                          check=False)


async def test_the_on_call_example_asks_every_triage_agent(deployment: Deployment) -> None:
    await listed(deployment)
    result = oncall(deployment, "Reply with PONG")
    assert result.returncode == 0, result.stderr
    answers = {answer["agent"]: answer for answer in json.loads(result.stdout)}
    # Tagged by the peer (zc, sdk) or by a skill (agent_beta's triage skill, also at zcbad).
    assert set(answers) == {"agent_alpha@zc", "agent_beta@zc", "agent_beta@zcbad",
                            "tck-scenario-agent@sdk"}
    assert answers["agent_alpha@zc"]["reply"] == "PONG"
    assert answers["agent_alpha@zc"]["directPeer"] == "zc"
    assert answers["tck-scenario-agent@sdk"]["state"] == "TASK_STATE_COMPLETED"
    assert answers["agent_beta@zcbad"]["state"] == "TASK_STATE_FAILED"
    assert "refused the token" in answers["agent_beta@zcbad"]["reply"]
    posts = len([r for r in deployment.zeroclaw_requests() if r["method"] == "POST"])
    again = oncall(deployment, "Reply with PONG")
    assert json.loads(again.stdout) == json.loads(result.stdout)
    assert len([r for r in deployment.zeroclaw_requests() if r["method"] == "POST"]) == posts
