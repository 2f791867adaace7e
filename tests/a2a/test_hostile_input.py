"""Nothing a client sends is stored in a form later reads cannot render, and no input makes a
500: each case is refused at the edge (HTTP+JSON 400, JSON-RPC an error at HTTP 200) before a
task exists, and ListTasks answers as before."""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

import pytest

from tests.a2a.local import Local
from tests.support.messages import user_message
from tests.support.processes import raw_request

HIGH_SURROGATE = "\\ud800"  # as JSON text: the escape of a lone surrogate


def send_body(text_json: str = '"hello"', message_id_json: str = '"m-1"',
              extra: str = "") -> str:
    return ('{"jsonrpc":"2.0","id":7,"method":"SendMessage","params":{"message":{'
            f'"messageId":{message_id_json},"role":"ROLE_USER","parts":[{{"text":{text_json}}}]'
            f'{extra}}},"configuration":{{"returnImmediately":true}}}}}}')


async def post(http, local: Local, path: str, body: str | bytes, **headers: str
               ) -> tuple[int, Any]:
    async with http.post(local.agent_url() + path, data=body, headers=local.headers(
            **{"Content-Type": "application/json", **headers})) as response:
        return response.status, json.loads(await response.text())


async def assert_nothing_stored(http, local: Local) -> None:
    async with http.get(local.agent_url() + "/rest/tasks", headers=local.headers()) as response:
        assert response.status == 200
        assert (await response.json())["tasks"] == []
    status, body = await post(http, local, "/jsonrpc", json.dumps(
        {"jsonrpc": "2.0", "id": 1, "method": "ListTasks", "params": {}}))
    assert status == 200 and body["result"]["tasks"] == []
    assert local.agent.seen == []


@pytest.fixture
def no_tracebacks(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING)
    yield
    tracebacks = [record for record in caplog.records if record.exc_info]
    assert not tracebacks, tracebacks[0].getMessage()


async def test_lone_surrogate_in_a_message_is_refused_before_it_is_stored(
        local: Local, http, no_tracebacks) -> None:
    status, body = await post(http, local, "/jsonrpc", send_body(f'"{HIGH_SURROGATE}"'))
    assert status == 200 and body["id"] == 7
    assert body["error"]["code"] == -32602
    assert "params.message.parts[0].text" in body["error"]["message"]
    rest = ('{"message":{"messageId":"m-2","role":"ROLE_USER","parts":[{"text":"a\\udfffb"}]}}')
    status, body = await post(http, local, "/rest/message:send", rest)
    assert status == 400 and body["error"]["status"] == "INVALID_ARGUMENT"
    # Also as raw bytes: the UTF-8-like encoding of a surrogate is not UTF-8.
    status, body = await post(http, local, "/jsonrpc", send_body('"X"').encode().replace(
        b"X", b"\xed\xa0\x80"))
    assert status == 200 and body["error"]["code"] in {-32700, -32602}
    # A surrogate in the id cannot be echoed: the answer has id null.
    status, body = await post(http, local, "/jsonrpc", send_body().replace(
        '"id":7', f'"id":"{HIGH_SURROGATE}"'))
    assert body["id"] is None and body["error"]["code"] == -32600
    await assert_nothing_stored(http, local)
    status, body = await post(http, local, "/jsonrpc", send_body())
    assert "result" in body  # a clean message still goes


async def test_nan_and_infinity_are_refused_on_both_bindings(local: Local, http,
                                                             no_tracebacks) -> None:
    for constant in ("NaN", "Infinity", "-Infinity", "1e400"):
        rest = ('{"message":{"messageId":"m-1","role":"ROLE_USER","parts":[{"text":"x"}],'
                f'"metadata":{{"n":{constant}}}}}}}')
        status, body = await post(http, local, "/rest/message:send", rest)
        assert status == 400, (constant, body)
        status, body = await post(http, local, "/jsonrpc",
                                  send_body(extra=f',"metadata":{{"n":{constant}}}'))
        assert body["error"]["code"] == -32700, (constant, body)
    await assert_nothing_stored(http, local)


async def test_overlong_ids_are_refused(local: Local, http, no_tracebacks) -> None:
    status, body = await post(http, local, "/jsonrpc", send_body(message_id_json='"' + "m" * 201
                                                                 + '"'))
    assert body["error"]["code"] == -32602 and "messageId" in body["error"]["message"]
    status, body = await post(http, local, "/jsonrpc",
                              send_body(extra=',"contextId":"' + "c" * 201 + '"'))
    assert body["error"]["code"] == -32602 and "contextId" in body["error"]["message"]
    await assert_nothing_stored(http, local)
    status, body = await post(http, local, "/jsonrpc", send_body(
        message_id_json='"' + "m" * 200 + '"', extra=',"contextId":"' + "c" * 200 + '"'))
    assert "result" in body  # the bound itself is accepted


async def test_extreme_timestamps_are_invalid_params(local: Local, http, no_tracebacks) -> None:
    for stamp in ("0001-01-01T00:00:00+23:59", "9999-12-31T23:59:59-23:59"):
        async with http.get(local.agent_url() + "/rest/tasks", params={
                "statusTimestampAfter": stamp}, headers=local.headers()) as response:
            assert response.status == 400, stamp
        status, body = await post(http, local, "/jsonrpc", json.dumps({
            "jsonrpc": "2.0", "id": 1, "method": "ListTasks",
            "params": {"statusTimestampAfter": stamp}}))
        assert body["error"]["code"] == -32602, stamp


async def test_a_body_that_is_not_what_its_content_encoding_says(local: Local, http,
                                                                 no_tracebacks) -> None:
    for path in ("/jsonrpc", "/rest/message:send"):
        async with http.post(local.agent_url() + path, data=b"this is not gzip",
                             headers=local.headers(**{"Content-Type": "application/json",
                                                      "Content-Encoding": "gzip"})) as response:
            assert response.status == (200 if path == "/jsonrpc" else 400)
            body = await response.json()
        if path == "/jsonrpc":
            assert body["error"]["code"] == -32700
        assert "Content-Encoding" in json.dumps(body)
    await asyncio.sleep(0.05)  # aiohttp would log its traceback after the answer
    await assert_nothing_stored(http, local)


async def test_authorization_that_is_not_utf8_is_401(local: Local, no_tracebacks) -> None:
    path = f"/a2a/v1/agents/{local.remote.aid}/rest/tasks".encode()
    for value in (b"Bearer \xff\xfe", b"\xff", b"Bearer " + local.token.encode() + b"\xc3"):
        answer = await asyncio.to_thread(raw_request, local.address,
                                         b"GET " + path + b" HTTP/1.1\r\nHost: "
                                         + local.address.encode() + b"\r\nAuthorization: "
                                         + value + b"\r\nConnection: close\r\n\r\n")
        assert answer.startswith(b"HTTP/1.1 401 "), answer[:80]


async def test_the_message_helper_still_sends(local: Local, http) -> None:
    status, body = await post(http, local, "/jsonrpc", json.dumps({
        "jsonrpc": "2.0", "id": 1, "method": "SendMessage",
        "params": {"message": user_message("hello \U0001f600"),
                   "configuration": {"returnImmediately": True}}}))
    assert "result" in body
