"""Each request check, in the order docs/a2a.md gives (a request failing two gets the first
answer), and bad input: never a 500, never a task created twice."""

from __future__ import annotations

import asyncio
import json

import aiohttp
import pytest

from tests.a2a.local import Local, rpc, two_nodes
from tests.support.messages import user_message

SEND = {"jsonrpc": "2.0", "id": 7, "method": "SendMessage",
        "params": {"message": user_message("hello")}}


def port(local: Local) -> str:
    return local.address.rpartition(":")[2]


async def post(http, local: Local, body: bytes | str, path: str = "/jsonrpc",
               **headers: str) -> tuple[int, dict, aiohttp.typedefs.LooseHeaders]:
    hdrs = {"Content-Type": "application/json", **local.headers(), **headers}
    async with http.post(local.agent_url() + path, data=body, headers=hdrs) as response:
        text = await response.text()
        return response.status, (json.loads(text) if text.startswith("{") else {}), \
            response.headers


async def test_host_must_be_loopback_with_port(local, http) -> None:
    for host in ("evil.example:" + port(local), "127.0.0.1:1", "localhost.evil:" + port(local)):
        # Also without a token and with an Origin: the Host check answers first.
        status, _, _ = await post(http, local, json.dumps(SEND), Host=host, Origin="http://x",
                                  Authorization="Bearer nope")
        assert status == 421
    for host in ("127.0.0.1", "localhost", "[::1]"):
        status, _, _ = await post(http, local, json.dumps(SEND), Host=f"{host}:{port(local)}")
        assert status == 200


async def test_origin_refused_before_token(local, http) -> None:
    status, _, _ = await post(http, local, json.dumps(SEND), Origin="http://127.0.0.1",
                              Authorization="Bearer nope")
    assert status == 403


# Trailing white space is not in the list: HTTP strips it from every field value (RFC 9110 §5.5),
# so the server never sees it.
@pytest.mark.parametrize("authorization", ["", "Bearer nope", "Basic x", "Bearer  {token}",
                                           "Bearer {token}x", "bearer{token}", "{token}",
                                           "Bearer \t{token}"])
async def test_token_required(local, http, authorization: str) -> None:
    status, _, headers = await post(http, local, "not even json",
                                    Authorization=authorization.format(token=local.token),
                                    **{"Content-Type": "text/plain", "A2A-Version": "9"})
    assert status == 401
    assert headers["WWW-Authenticate"] == 'Bearer realm="anet-local-a2a"'


async def test_control_token_refused_and_replaced_token_refused(local, http) -> None:
    from anet_core.control.loopback import TokenFile

    control = TokenFile(local.node.paths.control_token).ensure()
    status, _, _ = await post(http, local, json.dumps(SEND), Authorization=f"Bearer {control}")
    assert status == 401
    old = local.token
    local.state.token().replace()
    status, _, _ = await post(http, local, json.dumps(SEND), Authorization=f"Bearer {old}")
    assert status == 401


async def test_content_type_then_size_then_version(local, http) -> None:
    status, body, _ = await post(http, local, "{}", **{"Content-Type": "text/plain",
                                                       "A2A-Version": "2.0"})
    assert status == 200 and body["error"]["code"] == -32005
    status, body, _ = await post(http, local, "{}", "/rest/message:send",
                                 **{"Content-Type": "text/plain"})
    assert status == 415 and body["error"]["details"][0]["reason"] == "CONTENT_TYPE_NOT_SUPPORTED"
    status, body, _ = await post(http, local, json.dumps(SEND), **{"A2A-Version": "2.0"})
    assert status == 200 and body["error"]["code"] == -32009 and body["id"] == 7
    status, body, _ = await post(http, local, json.dumps(SEND), "/jsonrpc?A2A-Version=0.3")
    assert body["error"]["code"] == -32009
    status, body, _ = await post(http, local, "{}", "/rest/message:send", **{"A2A-Version": "3"})
    assert status == 400 and body["error"]["details"][0]["reason"] == "VERSION_NOT_SUPPORTED"
    for accepted in ("1.0", "1", "1.5"):
        status, body, _ = await post(http, local, json.dumps(SEND), **{"A2A-Version": accepted})
        assert "result" in body


async def test_huge_body_is_413_without_being_read(local, http) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", int(port(local)))
    writer.write((f"POST /a2a/v1/agents/{local.remote.aid}/jsonrpc HTTP/1.1\r\n"
                  f"Host: {local.address}\r\nAuthorization: Bearer {local.token}\r\n"
                  "Content-Type: application/json\r\nA2A-Version: 9\r\n"
                  f"Content-Length: {200 * 1024 * 1024}\r\n\r\n").encode())
    await writer.drain()
    status_line = await asyncio.wait_for(reader.readline(), 5)
    assert b" 413 " in status_line
    writer.close()


async def test_chunked_body_over_the_limit_is_413(local, http, monkeypatch) -> None:
    from anet_a2a import checks

    async def chunks():
        for _ in range(8):
            yield b" " * (16 * 1024 * 1024)

    async with http.post(f"{local.agent_url()}/jsonrpc", data=chunks(),
                         headers={**local.headers(), "Content-Type": "application/json"}) as r:
        assert r.status == 413
    assert checks.BODY_LIMIT == 96 * 1024 * 1024


async def test_slow_body_gets_408(tmp_path, http, monkeypatch) -> None:
    from anet_a2a import server

    monkeypatch.setattr(server, "BODY_TIMEOUT_S", 0.3)
    monkeypatch.setattr(server.build_app, "__kwdefaults__", {"body_timeout": 0.3})
    async with two_nodes(tmp_path) as local:
        reader, writer = await asyncio.open_connection("127.0.0.1", int(port(local)))
        writer.write((f"POST /a2a/v1/agents/{local.remote.aid}/jsonrpc HTTP/1.1\r\n"
                      f"Host: {local.address}\r\nAuthorization: Bearer {local.token}\r\n"
                      "Content-Type: application/json\r\nContent-Length: 100\r\n\r\n{").encode())
        await writer.drain()
        status_line = await asyncio.wait_for(reader.readline(), 5)
        assert b" 408 " in status_line
        writer.close()


async def test_not_registered_refused_and_no_task(local, http) -> None:
    local.node.hub.registered = False
    reply = await rpc(http, local, "SendMessage", {"message": user_message("hi", "m-unreg")})
    assert reply["error"]["code"] == -32004
    assert "not joined" in reply["error"]["message"]
    assert local.node.tasks.list(None)["totalSize"] == 0


@pytest.mark.parametrize("body, code", [
    (b"{not json", -32700), (b"[]", -32600), (b'"x"', -32600),
    (b'{"jsonrpc":"1.0","id":1,"method":"GetTask","params":{"id":"x"}}', -32600),
    (b'{"jsonrpc":"2.0","id":true,"method":"GetTask"}', -32600),
    (b'{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}', -32601),
    (b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":5}}', -32602),
    (b'{"jsonrpc":"2.0","id":1,"method":"SendMessage","params":{"message":{"role":"x"}}}', -32602),
    (b'{"jsonrpc":"2.0","id":1,"method":"ListTasks","params":{"pageSize":"lots"}}', -32602),
    (b'{"jsonrpc":"2.0","id":1,"method":"CreateTaskPushNotificationConfig","params":{}}', -32003),
    (b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":{"id":"someone-elses"}}', -32001),
])
async def test_bad_jsonrpc_input(local, http, body: bytes, code: int) -> None:
    status, reply, _ = await post(http, local, body)
    assert status == 200 and reply["error"]["code"] == code


@pytest.mark.parametrize("path", ["..", "..%2F..%2Fx", "%2E%2E", "a%2Fb", "A" * 32, "x" * 500])
async def test_aid_path_tricks(local, http, path: str) -> None:
    url = f"{local.base}/a2a/v1/agents/{path}/jsonrpc"
    async with http.post(aiohttp.client.URL(url, encoded=True), data=json.dumps(SEND),
                         headers={**local.headers(), "Content-Type": "application/json"}) as r:
        assert r.status < 500
    async with http.get(aiohttp.client.URL(f"{local.base}/a2a/v1/agents/{path}", encoded=True),
                        headers=local.headers()) as r:
        assert r.status in (404, 400)


async def test_own_aid_is_no_such_agent(local, http) -> None:
    async with http.get(local.agent_url(local.node.aid), headers=local.headers()) as r:
        assert r.status == 404 and "No such agent" in (await r.json())["error"]["message"]


async def test_repeat_is_one_task(local, http) -> None:
    params = {"message": user_message("hello", "m-rep", contextId="ctx-1")}
    first = await rpc(http, local, "SendMessage", params)
    again = await rpc(http, local, "SendMessage", params)
    assert first["result"]["task"]["id"] == again["result"]["task"]["id"]
    # Without a contextId a message starts a new context every time, whatever its messageId
    # (the A2A TCK reuses messageIds so; docs/a2a.md "Retries").
    others = [await rpc(http, local, "SendMessage", {"message": user_message("hello", "m-rep")})
              for _ in range(2)]
    ids = {first["result"]["task"]["id"], *(other["result"]["task"]["id"] for other in others)}
    assert len(ids) == 3
    assert local.node.tasks.list(None)["totalSize"] == 3


async def test_terminal_task_is_immutable(local, http) -> None:
    sent = await rpc(http, local, "SendMessage", {"message": user_message("hi")})
    done = sent["result"]["task"]
    again = await rpc(http, local, "SendMessage",
                      {"message": user_message("more", "m-2", taskId=done["id"])})
    assert again["error"]["code"] == -32004
    sub = await rpc(http, local, "SubscribeToTask", {"id": done["id"]})
    assert sub["error"]["code"] == -32004
    cancel = await rpc(http, local, "CancelTask", {"id": done["id"]})
    assert cancel["error"]["code"] == -32002


async def test_list_snake_case_history_and_artifacts(local, http) -> None:
    await rpc(http, local, "SendMessage", {"message": user_message("hi")})
    page = (await rpc(http, local, "ListTasks", {"page_size": 1, "history_length": 0}))["result"]
    assert set(page) == {"tasks", "nextPageToken", "pageSize", "totalSize"}
    assert "artifacts" not in page["tasks"][0] and "history" not in page["tasks"][0]
    page = (await rpc(http, local, "ListTasks", {"includeArtifacts": True}))["result"]
    assert page["tasks"][0]["artifacts"][0]["parts"] == [{"text": "echo: hi"}]


async def test_preview_only_when_requested(local, http) -> None:
    async def stream(**headers: str) -> list[dict]:
        body = {"jsonrpc": "2.0", "id": 1, "method": "SendStreamingMessage",
                "params": {"message": user_message("preview", headers.pop("mid"))}}
        async with http.post(f"{local.agent_url()}/jsonrpc", json=body,
                             headers=local.headers(**headers)) as r:
            assert r.headers["Content-Type"].startswith("text/event-stream")
            return [json.loads(line[5:]) async for line in r.content if line.startswith(b"data:")]

    plain = await stream(mid="p1")
    previewed = await stream(mid="p2", **{"A2A-Extensions": "urn:anet:a2a:preview/v1"})
    ids = lambda events: [e["result"]["artifactUpdate"]["artifact"]["artifactId"]  # noqa: E731
                          for e in events if "artifactUpdate" in e["result"]]
    assert "preview-1" not in ids(plain) and "preview-1" in ids(previewed)
    kinds = [next(iter(e["result"])) for e in plain]
    assert kinds[0] == "task" and kinds[-1] == "statusUpdate" and "artifactUpdate" in kinds
