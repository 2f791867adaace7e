"""Publishing in real processes: node "one" (a daemon that joined no hub) publishes aliases served
by its backend, an official a2a-sdk server on a unix socket run by this test; node "two" peers
with one's published surface, so a task goes from two's local endpoint to one's alias and back
with no hub between them. Clients are the official a2a-sdk client and plain HTTP."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import uuid
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
import pytest_asyncio
from a2a.client import ClientConfig, ClientFactory
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)

from anet_a2a.jws import SignatureState, verify_card
from anet_core.settings import DataPaths
from tests.support.processes import anet_async, free_port, listening
from tests.support.sdk_backend import Seen, sdk_backend
from tests.support.waiting import STEP_TIMEOUT_S, eventually

pytestmark = [pytest.mark.timeout(180), pytest.mark.asyncio(loop_scope="module")]

BACKEND_TOKEN = "backend-token-for-the-test"
RATE_LIMIT = 150


async def anet(root: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return await anet_async(root, *args, check=check)


def configure(root: Path, **modules: Any) -> None:
    path = root / "config.json"
    config = json.loads(path.read_text())
    config["modules"] = modules
    path.write_text(json.dumps(config, indent=2))


def evidence(root: Path, kind: str) -> list[dict[str, Any]]:
    chain = DataPaths(root).evidence_chain
    lines = chain.read_text().splitlines() if chain.exists() else []
    return [record["data"] for record in map(json.loads, lines) if record["kind"] == kind]


@dataclass
class Published:
    one: Path
    two: Path
    base: str
    seen: Seen
    tokens: dict[str, str]
    two_address: str
    two_token: str

    def alias(self, name: str) -> str:
        return f"{self.base}/a2a/{name}"

    def bearer(self, name: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.tokens[name]}"}


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def published(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[Published]:
    tmp = tmp_path_factory.mktemp("publish")
    sockets = Path("/tmp") / f"anet-pub-{uuid.uuid4().hex[:8]}"  # sun_path is short
    sockets.mkdir(mode=0o700)
    token_file = tmp / "backend.token"
    token_file.write_text(BACKEND_TOKEN + "\n")
    token_file.chmod(0o600)
    one, two, port = tmp / "one", tmp / "two", free_port()
    async with AsyncExitStack() as stack:
        stack.callback(shutil.rmtree, sockets, True)
        seen = await stack.enter_async_context(
            sdk_backend(sockets / "agent.sock", streaming=True, token=BACKEND_TOKEN))
        await anet(one, "init")
        backends = {"backends": [{"match": "*", "url": f"unix://{sockets}/agent.sock",
                                  "token_file": str(token_file)}],
                    "retry": {"give_up_after": "0"}}
        publish = {
            "enabled": False, "port": port, "rate_limit_per_minute": RATE_LIMIT,
            "aliases": {
                "triage": {"published": True, "skills": ["echo", "nope"],
                           "description": "Triage of incidents"},
                "plain": {"published": True},
                "desk": {"published": True, "serve": "inbox"},
                "hidden": {"skills": ["echo"]},
                "off": {"enabled": False, "published": True},
                "ghost": {"backend": "summarize", "published": True},
            }}
        # First closure: with publish.enabled false, nothing listens.
        configure(one, backends=backends, a2a={"publish": publish})
        stack.push_async_callback(lambda: anet(one, "stop", check=False))
        await anet(one, "up")
        assert not listening(port)
        doctor = json.loads((await anet(one, "doctor", "a2a-publish", "--json")).stdout)
        assert doctor["checks"][0]["status"] == "skip"
        await anet(one, "stop")
        configure(one, backends=backends, a2a={"publish": {**publish, "enabled": True}})
        tokens = {}
        for name, extra in (("alice", ()), ("bob", ("--alias", "desk")), ("carol", ()),
                            ("dave", ())):
            tokens[name] = (await anet(one, "publish", "token", "add", name, *extra)
                            ).stdout.splitlines()[0]
        await anet(one, "up")
        await eventually(lambda: listening(port), "one publishes")
        base = f"http://127.0.0.1:{port}"
        await anet(two, "init")
        configure(two, a2a={"peers": [{"name": "one", "base_url": base,
                                       "token": tokens["alice"]}],
                            "allowed_private_hosts": ["127.0.0.1"]})
        stack.push_async_callback(lambda: anet(two, "stop", check=False))
        await anet(two, "up")
        state = two / "modules" / "a2a"
        await eventually(lambda: (state / "a2a_addr.txt").exists(), "two's endpoint has an address")
        yield Published(one=one, two=two, base=base, seen=seen, tokens=tokens,
                        two_address=(state / "a2a_addr.txt").read_text().strip(),
                        two_token=(state / "a2a_token.txt").read_text().strip())


def user(text: str, **ids: Any) -> Message:
    ids.setdefault("message_id", f"m-{uuid.uuid4().hex}")
    return Message(role=Role.ROLE_USER, parts=[Part(text=text)], **ids)


async def post(url: str, body: Any, headers: dict[str, str] | None = None,
               raw: bytes | None = None) -> httpx.Response:
    async with httpx.AsyncClient(timeout=STEP_TIMEOUT_S) as http:
        if raw is not None:
            return await http.post(url, content=raw, headers={
                "Content-Type": "application/json", **(headers or {})})
        return await http.post(url, json=body, headers=headers or {})


def rpc(method: str, params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 7, "method": method, "params": params}


def send_params(text: str) -> dict[str, Any]:
    return {"message": {"messageId": uuid.uuid4().hex, "role": "ROLE_USER",
                        "parts": [{"text": text}]}}


async def test_discovery_needs_no_token_and_has_the_catalog_shape(published: Published) -> None:
    async with httpx.AsyncClient(timeout=STEP_TIMEOUT_S) as http:
        catalog = (await http.get(f"{published.base}/.well-known/agents-card.json")).json()
        again = (await http.get(f"{published.base}/a2a/.well-known/agents-card.json")).json()
        card = (await http.get(published.alias("triage") + "/.well-known/agent-card.json"))
        bare = (await http.get(published.alias("triage"))).json()
    assert [(i["url"], i["protocolBinding"]) for i in catalog["supportedInterfaces"]] == [
        (f"{published.base}/.well-known/agents-card.json", "catalog"),
        (published.alias("desk"), "JSONRPC"), (published.alias("plain"), "JSONRPC"),
        (published.alias("triage"), "JSONRPC")]
    assert catalog["capabilities"] == {"streaming": False, "pushNotifications": False,
                                       "extendedAgentCard": False}
    assert [(s["id"], s["tags"]) for s in catalog["skills"]] == [("triage/echo",
                                                                  ["echo", "triage"])]
    assert again["supportedInterfaces"] == catalog["supportedInterfaces"]
    assert card.status_code == 200 and card.json() == bare
    triage = card.json()
    assert triage["name"] == "triage" and triage["description"] == "Triage of incidents"
    assert [(i["url"], i["protocolBinding"]) for i in triage["supportedInterfaces"]] == [
        (published.alias("triage"), "JSONRPC"), (published.alias("triage") + "/rest",
                                                 "HTTP+JSON")]
    assert [skill["id"] for skill in triage["skills"]] == ["echo"]
    assert triage["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    for signed in (catalog, triage):
        assert verify_card(signed).state is SignatureState.VALID


async def test_the_closures_and_the_404s(published: Published) -> None:
    async with httpx.AsyncClient(timeout=STEP_TIMEOUT_S) as http:
        plain = (await http.get(published.alias("plain") + "/.well-known/agent-card.json")).json()
        assert "skills" not in plain, "an alias exposes no skill it does not name"
        for name in ("hidden", "off", "ghost", "nobody"):
            card = await http.get(published.alias(name) + "/.well-known/agent-card.json")
            assert card.status_code == 404, name
            task = await http.post(published.alias(name), json=rpc("SendMessage",
                                                                   send_params("hi")),
                                   headers=published.bearer("alice"))
            assert task.status_code == 404, name
        assert (await http.get(f"{published.base}/somewhere/else")).status_code == 404
    doctor = json.loads((await anet(published.one, "doctor", "a2a-publish", "--json",
                                    check=False)).stdout)
    detail = doctor["checks"][0]["detail"]
    assert doctor["checks"][0]["status"] == "warn"
    assert "'nope' is not a skill of backend '*'" in detail
    assert "aliases.ghost.backend 'summarize' names no configured backend" in detail


async def test_no_token_is_401_and_no_turn(published: Published) -> None:
    before = len(published.seen.messages)
    accepted = len(evidence(published.one, "task.accepted"))
    for headers in ({}, {"Authorization": "Bearer anet_pub_wrong"},
                    {"Authorization": f"Basic {published.tokens['alice']}"}):
        answer = await post(published.alias("triage"), rpc("SendMessage", send_params("hi")),
                            headers)
        assert answer.status_code == 401
        assert answer.headers["WWW-Authenticate"] == 'Bearer realm="anet-publish"'
        rest = await post(published.alias("triage") + "/rest/message:send",
                          send_params("hi"), headers)
        assert rest.status_code == 401
    await asyncio.sleep(0.5)
    assert len(published.seen.messages) == before
    assert len(evidence(published.one, "task.accepted")) == accepted


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
@pytest.mark.parametrize("streaming", [False, True])
async def test_the_a2a_sdk_client_on_the_published_surface(published: Published, binding: str,
                                                           streaming: bool) -> None:
    async with httpx.AsyncClient(headers=published.bearer("alice"),
                                 timeout=STEP_TIMEOUT_S) as http:
        client = await ClientFactory(ClientConfig(
            httpx_client=http, streaming=streaming,
            supported_protocol_bindings=[binding])).create_from_url(published.alias("triage"))
        events = [event async for event in client.send_message(SendMessageRequest(
            message=user("hello"), metadata={"ticket": "INC-1"}))]
        task_id = next(event.task.id for event in events if event.HasField("task"))
        task = await client.get_task(GetTaskRequest(id=task_id))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.artifacts[-1].parts[0].text == "echo: hello"
        sent = published.seen.metadata[-1]
        assert sent["anet.publish_alias"] == "triage" and sent["anet.publish_token"] == "alice"
        assert sent["anet.trusted"] is True and sent["ticket"] == "INC-1"
        page = await client.list_tasks(ListTasksRequest(page_size=100))
        assert task_id in [listed.id for listed in page.tasks]
        if streaming:
            slow = [event async for event in ClientFactory(ClientConfig(
                httpx_client=http, streaming=False,
                supported_protocol_bindings=[binding])).create(client._card).send_message(
                SendMessageRequest(message=user("slow job"),
                                   configuration=SendMessageConfiguration(
                                       return_immediately=True)))]
            slow_id = slow[0].task.id
            subscription = client.subscribe(SubscribeToTaskRequest(id=slow_id))
            first = await anext(subscription)
            assert first.task.id == slow_id
            canceled = await client.cancel_task(CancelTaskRequest(id=slow_id))
            assert canceled.status.state == TaskState.TASK_STATE_CANCELED
            rest = [event async for event in subscription]
            assert rest[-1].status_update.status.state == TaskState.TASK_STATE_CANCELED
        await client.close()


async def test_the_errors_zeroclaw_gives(published: Published) -> None:
    url, alice = published.alias("triage"), published.bearer("alice")
    unknown = await post(url, rpc("message/send", send_params("hi")), alice)
    assert unknown.status_code == 200 and unknown.json()["error"]["code"] == -32601
    empty = await post(url, rpc("SendMessage", {"message": {
        "messageId": "m", "role": "ROLE_USER", "parts": []}}), alice)
    assert empty.status_code == 200 and empty.json()["error"]["code"] == -32602
    version = await post(url, rpc("SendMessage", send_params("hi")),
                         {**alice, "A2A-Version": "2.0"})
    assert version.json()["error"]["code"] == -32009
    assert version.json()["error"]["data"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    for raw in (b"not json", b'{"jsonrpc": "1.0", "id": 1, "method": "SendMessage"}',
                b"[1, 2]"):
        answer = await post(url, None, alice, raw=raw)
        assert answer.status_code == 400, raw
    too_big = await post(url, None, alice, raw=b" " * (2 * 1024 * 1024))
    assert too_big.status_code == 413
    wrong_type = await post(url + "/rest/message:send", None,
                            {**alice, "Content-Type": "text/plain"}, raw=b"{}")
    assert wrong_type.status_code == 415


async def test_tokens_scopes_inbox_ownership_revocation_rotation_and_rates(
        published: Published) -> None:
    bob = published.bearer("bob")
    assert (await post(published.alias("triage"), rpc("SendMessage", send_params("x")),
                       bob)).status_code == 404, "bob's token reaches only desk"
    waiting = (await post(published.alias("desk"), rpc("SendMessage", send_params("call me")),
                          bob)).json()["result"]["task"]
    assert waiting["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert waiting["metadata"]["anet.reason"] == "queued_for_operator"
    inbox = json.loads((await anet(published.one, "inbox", "--json")).stdout)
    assert waiting["id"] in json.dumps(inbox)
    await anet(published.one, "reply", waiting["id"], "the operator calls back")
    done = (await post(published.alias("desk"), rpc("GetTask", {"id": waiting["id"]}),
                       bob)).json()["result"]
    assert done["status"]["state"] == "TASK_STATE_COMPLETED"
    # Alice's token reaches desk too, but not bob's tasks there.
    other = (await post(published.alias("desk"), rpc("GetTask", {"id": waiting["id"]}),
                        published.bearer("alice"))).json()
    assert other["error"]["code"] == -32001  # TaskNotFoundError

    listed = (await anet(published.one, "publish", "token", "list")).stdout
    assert "bob" in listed and all(token not in listed for token in published.tokens.values())
    stored = (published.one / "modules" / "a2a" / "publish_tokens.json").read_text()
    assert all(token not in stored for token in published.tokens.values())

    await anet(published.one, "publish", "token", "revoke", "bob")
    assert (await post(published.alias("desk"), rpc("GetTask", {"id": waiting["id"]}),
                       bob)).status_code == 401
    old = published.bearer("dave")
    new = (await anet(published.one, "publish", "token", "rotate", "dave")).stdout.split()[0]
    assert (await post(published.alias("desk"), rpc("ListTasks", {}), old)).status_code == 401
    assert (await post(published.alias("desk"), rpc("ListTasks", {}),
                       {"Authorization": f"Bearer {new}"})).status_code == 200

    carol = published.bearer("carol")
    statuses = [(await post(published.alias("plain"), rpc("ListTasks", {}), carol)).status_code
                for _ in range(RATE_LIMIT + 1)]
    assert statuses[:RATE_LIMIT] == [200] * RATE_LIMIT and statuses[-1] == 429


async def test_two_nodes_with_no_hub_between_them(published: Published) -> None:
    headers = {"Authorization": f"Bearer {published.two_token}"}
    agent = f"http://{published.two_address}/a2a/v1/agents/triage@one"

    async def peered() -> bool:
        async with httpx.AsyncClient(headers=headers, timeout=STEP_TIMEOUT_S) as http:
            listing = (await http.get(f"http://{published.two_address}/a2a/v1/agents")).json()
        return {"triage@one", "plain@one", "desk@one"} <= {a["aid"] for a in listing["agents"]}

    await eventually(peered, "two lists one's published agents")
    async with httpx.AsyncClient(headers=headers, timeout=STEP_TIMEOUT_S) as http:
        card = (await http.get(agent)).json()
        extension = next(e for e in card["capabilities"]["extensions"]
                         if e["uri"] == "urn:anet:a2a:direct-peer/v1")
        assert extension["params"]["signature"] == "valid"
        client = await ClientFactory(ClientConfig(httpx_client=http)).create_from_url(agent)
        events = [event async for event in client.send_message(SendMessageRequest(
            message=user("across"), metadata={"from": "two"}))]
        task_id = next(event.task.id for event in events if event.HasField("task"))
        task = await client.get_task(GetTaskRequest(id=task_id))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.artifacts[-1].parts[0].text == "echo: across"
        await client.close()
    assert published.seen.metadata[-1]["anet.publish_token"] == "alice"
    calls = evidence(published.two, "a2a.peer_call")
    assert {"catalog", "agent-card", "SendMessage"} <= {call["operation"] for call in calls}
    peers = (await anet(published.two, "agents", "peers")).stdout
    assert "triage@one" in peers and published.tokens["alice"] not in peers
