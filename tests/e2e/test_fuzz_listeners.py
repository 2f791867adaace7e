"""Generated hostile input against the real listeners of a real network on loopback.

A hub (`anet hub serve`) and two daemons (`anet up`): alice serves the local A2A endpoint, bob
trusts alice and keeps her tasks in his inbox. Hypothesis sends what no correct client would
(lone surrogates, NaN, deep nesting, wrong types, bytes that are not UTF-8, unknown routes and
frames) to alice's A2A endpoint, alice's control plane and the hub's WebSocket. After every
example:

- every request got an answer, and none is a 5xx;
- no log of the three processes holds a traceback;
- what was stored still reads: ListTasks answers 200 on both bindings and on the control plane.

The examples are few (a few hundred in all) so the suite stays within a minute.
"""

from __future__ import annotations

import asyncio
import http.client
import json
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import quote, urlencode

import aiohttp
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

pytest.importorskip("anet_a2a")
pytest.importorskip("anet_hub")

from anet_core.identity import Identity
from anet_core.link.client import normalize_hub_url
from anet_core.protocol.frames import (
    NODE_FRAME,
    REGISTER_CONTEXT,
    WS_PATH,
    AckFrame,
    registration_bytes,
)
from anet_core.util.canonical import b64u
from tests.support.processes import HubProcess, NodeDir, free_port
from tests.support.waiting import STEP_TIMEOUT_S

pytestmark = pytest.mark.timeout(120)

FUZZ = settings(deadline=None, suppress_health_check=[HealthCheck.too_slow], database=None)

# --- the network ---------------------------------------------------------------------------


@dataclass
class Log:
    path: Path
    offset: int = 0

    def new_tracebacks(self) -> str:
        """What the process logged since the last call, when it holds a traceback."""
        try:
            with open(self.path, "rb") as handle:
                handle.seek(self.offset)
                text = handle.read().decode(errors="replace")
        except FileNotFoundError:
            return ""
        self.offset += len(text.encode(errors="replace"))
        return text if "Traceback" in text else ""


@dataclass
class Network:
    a2a: str
    a2a_token: str
    control: str
    control_token: str
    bob: str
    hub_port: int
    root: Path
    logs: list[Log] = field(default_factory=list)

    def check(self) -> None:
        """The invariants every example must leave intact."""
        for log in self.logs:
            traceback = log.new_tracebacks()
            assert not traceback, f"{log.path}:\n{traceback[-3000:]}"
        status, body = post(self.a2a, f"{agent_path(self.bob)}/jsonrpc", json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}).encode(),
            self.a2a_headers())
        assert status == 200 and "result" in strict(body), body[:300]
        status, body = request(self.a2a, "GET", f"{agent_path(self.bob)}/rest/tasks",
                               headers=self.a2a_headers())
        assert status == 200 and "tasks" in strict(body), body[:300]
        status, body = request(self.control, "GET", "/tasks/list",
                               headers=self.control_headers())
        assert status == 200 and "tasks" in strict(body), body[:300]

    def check_task(self, task_id: str) -> None:
        """A task the endpoint stored reads back on both bindings."""
        status, body = post(self.a2a, f"{agent_path(self.bob)}/jsonrpc", json.dumps(
            {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": task_id}}).encode(),
            self.a2a_headers())
        assert status == 200 and "result" in strict(body), body[:300]
        status, body = request(self.a2a, "GET", f"{agent_path(self.bob)}/rest/tasks/{task_id}",
                               headers=self.a2a_headers())
        assert status == 200 and strict(body)["id"] == task_id, body[:300]

    def a2a_headers(self, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.a2a_token}", "Content-Type": "application/json",
                **extra}

    def control_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.control_token}",
                "Content-Type": "application/json"}


def strict(body: bytes) -> Any:
    """The answer as JSON a strict client reads (no NaN, UTF-8 only)."""
    def refuse(name: str) -> None:
        raise AssertionError(f"the answer holds {name}, which is not JSON")

    return json.loads(body.decode("utf-8"), parse_constant=refuse)


def agent_path(aid: str) -> str:
    return f"/a2a/v1/agents/{aid}"


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Network]:
    root = tmp_path_factory.mktemp("fuzz")
    hub = HubProcess(root / "hub", free_port())
    alice, bob = NodeDir(root / "alice", disabled="backends"), NodeDir(root / "bob",
                                                                       disabled="a2a")
    try:
        hub.start()
        for node in (alice, bob):
            node.run("init")
            node.run("join", hub.url)
            node.run("up")
        for node in (alice, bob):
            node.wait_registered()
        bob.run("trust", "add", alice.aid)
        state = alice.root / "modules" / "a2a"
        yield Network(
            a2a=(state / "a2a_addr.txt").read_text().strip(),
            a2a_token=(state / "a2a_token.txt").read_text().strip(),
            control=(alice.root / "control_addr.txt").read_text().strip(),
            control_token=(alice.root / "control_token.txt").read_text().strip(),
            bob=bob.aid, hub_port=hub.port, root=root,
            logs=[Log(root / "hub.log"), Log(alice.root / "logs" / "anetd.log"),
                  Log(bob.root / "logs" / "anetd.log")])
    finally:
        for node in (alice, bob):
            node.stop()
        hub.stop()


# --- HTTP without a client library's help ------------------------------------------------------


def request(address: str, method: str, path: str, body: bytes | None = None,
            headers: dict[str, str] | None = None) -> tuple[int, bytes]:
    """One request; its status and body. A connection closed without an answer fails."""
    host, _, port = address.rpartition(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=STEP_TIMEOUT_S)
    try:
        connection.request(method, path, body=body, headers=headers or {})
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def post(address: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    return request(address, "POST", path, body, headers)


def raw_exchange(address: str, data: bytes) -> bytes:
    """Send bytes as they are; the first line of the answer (a closed connection fails)."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=STEP_TIMEOUT_S) as sock:
        sock.sendall(data)
        answer = b""
        while b"\r\n" not in answer:
            chunk = sock.recv(4096)
            assert chunk, f"the connection closed without an answer to {data[:120]!r}"
            answer += chunk
    return answer.split(b"\r\n", 1)[0]


# --- strategies --------------------------------------------------------------------------------

# Any character, lone surrogates included (json.dumps writes them as \ud800 escapes).
hostile_text = st.text(st.characters() | st.characters(categories=["Cs"]), max_size=12)
numbers = (st.integers(min_value=-(2**70), max_value=2**70)
           | st.floats(allow_nan=True, allow_infinity=True))
leaves = st.none() | st.booleans() | numbers | hostile_text
json_values = st.recursive(leaves, lambda inner: st.lists(inner, max_size=3)
                           | st.dictionaries(hostile_text, inner, max_size=3), max_leaves=8)
ids = hostile_text | st.text("abcdef0123456789", min_size=1, max_size=40) | json_values
parts = st.lists(st.fixed_dictionaries({}, optional={
    "text": hostile_text | json_values, "data": json_values, "raw": hostile_text,
    "url": hostile_text, "mediaType": hostile_text, "metadata": json_values}), max_size=3)
messages = st.fixed_dictionaries({
    "messageId": ids, "role": st.sampled_from(["ROLE_USER", "ROLE_AGENT", "", "user"]) | ids,
    "parts": parts | json_values}, optional={
    "contextId": ids, "taskId": ids, "metadata": json_values,
    "extensions": st.lists(hostile_text, max_size=2), "referenceTaskIds": json_values})
# Valid but for one hostile value: these reach the task store when the edge lets them through.
near_valid_messages = st.fixed_dictionaries({
    "messageId": st.text(min_size=1, max_size=220) | hostile_text.filter(bool),
    "role": st.just("ROLE_USER"),
    "parts": st.lists(st.fixed_dictionaries({"text": hostile_text})
                      | st.fixed_dictionaries({"data": json_values}), min_size=1, max_size=2)},
    optional={"contextId": st.text(max_size=220) | hostile_text,
              "metadata": st.dictionaries(hostile_text, json_values, max_size=2)})
params = st.fixed_dictionaries({}, optional={
    "message": near_valid_messages | messages | json_values, "id": ids, "metadata": json_values,
    "historyLength": numbers | json_values, "pageSize": numbers, "pageToken": ids,
    "contextId": ids, "status": st.sampled_from(["TASK_STATE_WORKING", "NOPE"]) | ids,
    "statusTimestampAfter": st.sampled_from(["0001-01-01T00:00:00+23:59",
                                             "9999-12-31T23:59:59-23:59",
                                             "2026-01-01T00:00:00Z"]) | ids,
    "includeArtifacts": json_values, "tenant": ids,
    "configuration": st.fixed_dictionaries({}, optional={
        "historyLength": numbers, "acceptedOutputModes": json_values})})
methods = st.sampled_from(["SendMessage", "GetTask", "ListTasks", "CancelTask",
                           "GetExtendedAgentCard", "CreateTaskPushNotificationConfig",
                           "SendStreamingMessage", "message/send"]) | hostile_text


def deep(depth: int) -> str:
    return "[" * depth + "]" * depth


@st.composite
def bodies(draw: st.DrawFn, structured: st.SearchStrategy[Any]) -> bytes:
    """A structured document as JSON (NaN and lone surrogates as Python writes them), or it
    broken: cut short, nested deep, or bytes that are not UTF-8."""
    text = json.dumps(draw(structured), allow_nan=True)
    mutation = draw(st.sampled_from(["as-is"] * 6 + ["cut", "deep", "bytes", "wrapped-deep"]))
    if mutation == "cut":
        return text[:draw(st.integers(0, max(0, len(text) - 1)))].encode()
    if mutation == "deep":
        return deep(draw(st.integers(60, 5000))).encode()
    if mutation == "wrapped-deep":
        return text.replace("null", deep(draw(st.integers(60, 3000))), 1).encode()
    if mutation == "bytes":
        return text.encode() + draw(st.sampled_from([b"\xff", b"\xed\xa0\x80", b"\xc3"]))
    return text.encode()


list_params = st.fixed_dictionaries({}, optional={
    "pageSize": st.integers(-5, 200), "historyLength": st.integers(-5, 2**40),
    "contextId": st.text(max_size=220) | hostile_text, "pageToken": hostile_text,
    "statusTimestampAfter": st.sampled_from(["0001-01-01T00:00:00+23:59",
                                             "2026-01-01T00:00:00.123456789Z"]) | hostile_text,
    "includeArtifacts": st.booleans()})


@st.composite
def jsonrpc_calls(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["send", "send", "list", "any"]))
    if kind == "send":  # a send that is valid but for what hypothesis puts in the message
        return {"jsonrpc": "2.0", "id": draw(st.integers(0, 2**31)), "method": "SendMessage",
                "params": {"message": draw(near_valid_messages),
                           "configuration": {"returnImmediately": True}}}
    if kind == "list":
        return {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": draw(list_params)}
    call: dict[str, Any] = {"jsonrpc": draw(st.sampled_from(["2.0", "2.0", "1.0"]) | ids),
                            "method": draw(methods)}
    if draw(st.booleans()):
        call["id"] = draw(ids)
    drawn = draw(params | json_values)
    if isinstance(drawn, dict):
        # A send must not wait for bob's operator: the answer comes at once.
        drawn["configuration"] = {**(drawn.get("configuration") or {}),
                                  "returnImmediately": True}
    call["params"] = drawn
    return call


def answered(status: int, body: bytes, what: object) -> None:
    assert status < 500, f"{what!r} -> HTTP {status}: {body[:300]!r}"


# --- the local A2A endpoint ----------------------------------------------------------------


@settings(FUZZ, max_examples=100)
@given(body=bodies(jsonrpc_calls()), slash=st.booleans())
def test_jsonrpc_binding(network: Network, body: bytes, slash: bool) -> None:
    path = f"{agent_path(network.bob)}/jsonrpc" + ("/" if slash else "")
    status, answer = post(network.a2a, path, body, network.a2a_headers())
    answered(status, answer, body[:200])
    assert status == 200, (body[:200], answer[:300])  # JSON-RPC errors are HTTP 200 too
    document = strict(answer) if not answer.startswith(b"data:") else {}
    task = (document.get("result") or {}).get("task") if isinstance(document, dict) else None
    if isinstance(task, dict):
        network.check_task(task["id"])
    network.check()


rest_routes = st.sampled_from([
    ("POST", "/message:send"), ("POST", "/message:stream"), ("GET", "/tasks"),
    ("GET", "/tasks/{id}"), ("POST", "/tasks/{id}:cancel"), ("GET", "/extendedAgentCard"),
    ("POST", "/tasks/{id}/pushNotificationConfigs"), ("DELETE", "/tasks/{id}"),
    ("PUT", "/message:send"), ("GET", "/{id}")])
path_segments = st.text("abcdef0123456789-_.~%:", min_size=1, max_size=30) | st.sampled_from(
    ["%ED%A0%80", "%FF", "%00", "..", "%2F"])
query_values = st.lists(st.tuples(st.sampled_from(
    ["pageSize", "historyLength", "statusTimestampAfter", "status", "contextId", "pageToken",
     "includeArtifacts", "A2A-Version", "x"]), st.text(max_size=30)), max_size=3)


rest_bodies = st.fixed_dictionaries(
    {"configuration": st.just({"returnImmediately": True}),
     "message": near_valid_messages | near_valid_messages | messages | json_values},
    optional={"metadata": json_values})


@settings(FUZZ, max_examples=70)
@given(route=rest_routes, segment=path_segments, query=query_values,
       body=bodies(rest_bodies | json_values), on_bob=st.booleans())
def test_http_json_binding(network: Network, route: tuple[str, str], segment: str,
                           query: list[tuple[str, str]], body: bytes, on_bob: bool) -> None:
    method, template = route
    aid = network.bob if on_bob else segment
    path = f"/a2a/v1/agents/{quote(aid, safe='%')}/rest" + template.format(id=segment)
    if query:
        path += "?" + urlencode(query)
    status, answer = request(network.a2a, method, path,
                             body if method in {"POST", "PUT"} else None,
                             network.a2a_headers())
    answered(status, answer, (method, path, body[:200]))
    if answer.startswith(b"{"):  # a stream's events are checked by the JSON-RPC test
        task = strict(answer).get("task")
        if isinstance(task, dict) and on_bob:
            network.check_task(task["id"])
    network.check()


header_values = st.binary(max_size=40).filter(lambda value: b"\r" not in value
                                              and b"\n" not in value)


@settings(FUZZ, max_examples=40)
@given(authorization=header_values | st.just(None), version=header_values | st.just(None),
       content_type=st.sampled_from([b"application/json", b"text/plain", b"application/a2a+json",
                                     b""]) | header_values,
       encoding=st.sampled_from([None, b"gzip", b"deflate", b"br", b"identity"]),
       with_token=st.booleans(), body=bodies(jsonrpc_calls()))
def test_hostile_headers(network: Network, authorization: bytes | None, version: bytes | None,
                         content_type: bytes, encoding: bytes | None, with_token: bool,
                         body: bytes) -> None:
    if with_token:
        authorization = b"Bearer " + network.a2a_token.encode()
    head = [f"POST {agent_path(network.bob)}/jsonrpc HTTP/1.1".encode(),
            b"Host: " + network.a2a.encode(), b"Content-Type: " + content_type,
            b"Content-Length: " + str(len(body)).encode(), b"Connection: close"]
    for name, value in ((b"Authorization", authorization), (b"A2A-Version", version),
                        (b"Content-Encoding", encoding)):
        if value is not None:
            head.append(name + b": " + value)
    line = raw_exchange(network.a2a, b"\r\n".join(head) + b"\r\n\r\n" + body)
    assert line.startswith(b"HTTP/1."), line
    status = int(line.split()[1])
    answered(status, line, head)
    network.check()


# --- the control plane ---------------------------------------------------------------------

control_routes = st.sampled_from([
    ("POST", "/tasks/send"), ("POST", "/tasks/cancel"), ("POST", "/tasks/reply"),
    ("POST", "/tasks/reject"), ("POST", "/tasks/review"), ("POST", "/tasks/policy"),
    ("POST", "/tasks/trust/add"), ("POST", "/tasks/trust/remove"), ("POST", "/hub/join"),
    ("GET", "/tasks/list"), ("GET", "/tasks/agents"), ("GET", "/tasks/task/{id}"),
    ("GET", "/tasks/inbox"), ("GET", "/core/status"), ("GET", "/hub/status"),
    ("POST", "/nowhere")])
control_bodies = st.fixed_dictionaries({}, optional={
    "aid": ids, "text": hostile_text | json_values, "taskId": ids, "skill": ids,
    "reason": json_values, "rating": numbers | json_values, "policy": st.sampled_from(
        ["trusted", "closed", "open", "nope"]) | ids, "url": hostile_text | json_values,
    "inputRequired": json_values, "emergency": json_values}) | json_values


@settings(FUZZ, max_examples=50)
@given(route=control_routes, segment=path_segments, query=query_values,
       body=bodies(control_bodies))
def test_control_plane(network: Network, route: tuple[str, str], segment: str,
                       query: list[tuple[str, str]], body: bytes) -> None:
    method, template = route
    if template == "/hub/join":
        # A URL that parses would move the node to another hub: that is no hostile input.
        try:
            url = json.loads(body).get("url")
            normalize_hub_url(url)
            assume(False)
        except (ValueError, AttributeError, TypeError, RecursionError):
            pass  # not a JSON object with a URL (or nested past what json.loads takes)
    path = template.format(id=quote(segment, safe="%"))
    if method == "GET" and query:
        path += "?" + urlencode(query)
    status, answer = request(network.control, method, path,
                             body if method == "POST" else None, network.control_headers())
    answered(status, answer, (method, path, body[:200]))
    network.check()
    # Put the node back as it was for the next examples: trusted policy, bob's AID known.
    request(network.control, "POST", "/tasks/policy", b'{"policy": "trusted"}',
            network.control_headers())


# --- the hub's WebSocket -------------------------------------------------------------------

frame_types = st.sampled_from(["register", "send", "ack", "publish", "lookup", "search",
                               "review", "deliver", "nope"]) | hostile_text
frames = st.fixed_dictionaries({"type": frame_types}, optional={
    "rid": ids, "aid": ids, "envelope": json_values, "id": ids, "card": json_values,
    "q": hostile_text, "cursor": ids, "limit": numbers, "review": json_values,
    "history": json_values})


async def _hub_session(port: int, identity: Identity, texts: list[str], register: bool) -> None:
    url = f"ws://127.0.0.1:{port}{WS_PATH}"
    async with aiohttp.ClientSession() as session, session.ws_connect(url) as ws:
        challenge = await ws.receive_json(timeout=STEP_TIMEOUT_S)
        if register:
            signed = registration_bytes(hub_aid=challenge["hubAid"], hub_url=url,
                                        nonce=challenge["nonce"], ts=challenge["ts"],
                                        aid=identity.aid, key_seq=identity.key_seq)
            await ws.send_json({"type": "register", "aid": identity.aid,
                                "history": identity.history, "hubUrl": url,
                                "nonce": challenge["nonce"], "ts": challenge["ts"],
                                "signature": b64u(identity.sign(signed,
                                                                context=REGISTER_CONTEXT))})
            registered = await ws.receive_json(timeout=STEP_TIMEOUT_S)
            assert registered["type"] == "registered", registered
        for text in texts:
            await ws.send_str(text)
            if register and _is_ack(text):
                continue  # a well-formed ack is the one frame the hub does not answer
            while True:
                message = await ws.receive(timeout=STEP_TIMEOUT_S)
                assert message.type is aiohttp.WSMsgType.TEXT, (
                    f"the hub answered {text[:120]!r} with {message.type.name} "
                    f"{message.data!r}, not a frame")
                answer = json.loads(message.data)
                if answer.get("type") != "deliver":
                    break
            assert answer.get("type") != "error" or answer.get("reason"), answer
            if not register:
                return  # an unregistered connection is answered once, then closed


def _is_ack(text: str) -> bool:
    try:
        return isinstance(NODE_FRAME.validate_json(text), AckFrame)
    except ValueError:
        return False


@pytest.fixture(scope="module")
def raw_identity(network: Network) -> Identity:
    return Identity.create(network.root / "raw-node" / "identity")


@settings(FUZZ, max_examples=50)
@given(documents=st.lists(frames.map(lambda frame: json.dumps(frame, allow_nan=True))
                          | st.sampled_from([deep(1000), "not json", '{"type":"search","rid":'
                                             '"r","q":"\\ud800"}', "[]", "null", '"x"']),
                          min_size=1, max_size=4),
       register=st.booleans())
def test_hub_websocket(network: Network, raw_identity: Identity, documents: list[str],
                       register: bool) -> None:
    asyncio.run(_hub_session(network.hub_port, raw_identity, documents, register))
    network.check()
