"""What the remote agent's answer looks like to a client of the local endpoint: a Message reply,
a task that waits for the remote operator, request metadata on the way there, file bytes kept out
of streams; and the listener's deadline for slow request headers."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from anet_a2a import server
from tests.a2a.conftest import FILE_BYTES, Local, eventually, message, rpc, two_nodes

pytestmark = pytest.mark.timeout(60)


async def stream(http: aiohttp.ClientSession, local: Local, method: str,
                 params: Any) -> list[dict[str, Any]]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    async with http.post(f"{local.agent_url()}/jsonrpc", json=body,
                         headers=local.headers()) as response:
        assert response.content_type == "text/event-stream"
        lines = [line async for line in response.content]
    return [json.loads(line[5:])["result"] for line in lines if line.startswith(b"data:")]


async def test_a_message_reply_is_a_message_on_both_bindings(local: Local, http) -> None:
    answer = await rpc(http, local, "SendMessage", {"message": message("message me", "m-1")})
    reply = answer["result"]["message"]
    assert reply["parts"] == [{"text": "a message, no task"}]
    assert reply["role"] == "ROLE_AGENT" and reply["metadata"] == {"kept": True}
    assert "taskId" not in reply and reply["contextId"]
    # The same (contextId, messageId) again: the same Message, nothing sent twice.
    again = await rpc(http, local, "SendMessage", {"message": message(
        "message me", "m-1", contextId=reply["contextId"])})
    assert again["result"]["message"] == reply
    assert len(local.agent.seen) == 1

    async with http.post(f"{local.agent_url()}/rest/message:send", json={
            "message": message("message rest", "m-2")}, headers=local.headers()) as response:
        assert response.status == 200
        assert (await response.json())["message"]["parts"] == [{"text": "a message, no task"}]

    events = await stream(http, local, "SendStreamingMessage",
                          {"message": message("message stream", "m-3")})
    assert [list(event) for event in events] == [["message"]]
    # The node keeps its record of the exchange as a completed task.
    tasks = (await rpc(http, local, "ListTasks", {}))["result"]["tasks"]
    assert len(tasks) == 3 and {t["status"]["state"] for t in tasks} == {"TASK_STATE_COMPLETED"}
    assert all(t["metadata"]["anet.message_reply"] is True for t in tasks)


async def test_request_metadata_reaches_the_agent_and_message_metadata_is_unchanged(
        local: Local, http) -> None:
    sent = message("hello", "m-1") | {"metadata": {"client": {"trace": 7}}}
    await rpc(http, local, "SendMessage", {"message": sent,
                                           "metadata": {"request": "level", "n": 1}})
    offered = local.agent.seen[0]
    assert offered.metadata == {"request": "level", "n": 1}
    assert offered.message["metadata"] == {"client": {"trace": 7}}
    assert offered.message["messageId"] == "m-1" and offered.message["parts"] == sent["parts"]


async def test_a_send_does_not_wait_for_the_remote_operator(local: Local, http) -> None:
    answer = await rpc(http, local, "SendMessage", {"message": message("inbox please")})
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert task["metadata"]["anet.reason"] == "queued_for_operator"
    events = await stream(http, local, "SendStreamingMessage",
                          {"message": message("inbox again", "m-2")})
    last = events[-1].get("statusUpdate") or events[-1]["task"]  # the update may come first
    assert last["metadata"]["anet.reason"] == "queued_for_operator"
    assert await eventually(lambda: len(local.remote.tasks.inbox()) == 2)


async def test_streams_carry_file_metadata_and_get_task_the_bytes(local: Local, http) -> None:
    events = await stream(http, local, "SendStreamingMessage",
                          {"message": message("file please")})
    parts = [event["artifactUpdate"]["artifact"]["parts"][0] for event in events
             if "artifactUpdate" in event]
    assert parts == [{"data": {"size": len(FILE_BYTES), "mediaType": "text/plain",
                               "filename": "notes.txt"},
                      "filename": "notes.txt", "metadata": {"anet.file_bytes": "omitted"}}]
    assert "raw" not in json.dumps(events)
    task_id = events[0]["task"]["id"]
    task = (await rpc(http, local, "GetTask", {"id": task_id}))["result"]
    assert base64.b64decode(task["artifacts"][0]["parts"][0]["raw"]) == FILE_BYTES


async def test_slow_request_headers_are_cut_off(tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(server, "HEADER_TIMEOUT_S", 0.5)
    async with two_nodes(tmp_path) as local:
        host, _, port = local.address.rpartition(":")
        reader, writer = await asyncio.open_connection(host, int(port))
        writer.write(b"GET /a2a/v1/agents HTTP/1.1\r\nHost: " + local.address.encode() + b"\r\n")
        await writer.drain()
        async with asyncio.timeout(10):
            assert await reader.read() == b""  # closed without an answer
        writer.close()
        # A complete request is still served.
        async with aiohttp.ClientSession() as http:
            async with http.get(f"{local.base}/a2a/v1/agents",
                                headers=local.headers()) as response:
                assert response.status == 200


async def test_the_forwarder_sends_request_metadata_and_passes_a_message_reply() -> None:
    import dataclasses
    import shutil
    import tempfile

    from aiohttp import web

    from tests.backends.conftest import Recorder, fake_backend, inbound, make_harness

    async def answer(request: web.Request, body: dict[str, Any], n: int) -> web.Response:
        return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": {"message": {
            "messageId": "r-1", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}}})

    directory = Path(tempfile.mkdtemp(prefix="anet-a2a-"))
    try:
        task = dataclasses.replace(inbound("hello"), metadata={"request": 1, "anet.trusted": 0})
        async with fake_backend(directory / "b.sock", answer) as backend:
            recorder = await make_harness(f"unix://{directory / 'b.sock'}").serve(task, Recorder())
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    assert backend.posts[0]["params"]["metadata"] == {
        "request": 1, "anet.peer_aid": task.peer_aid, "anet.trusted": True}
    assert recorder.events == [("reply_message", {"messageId": "r-1", "role": "ROLE_AGENT",
                                                  "parts": [{"text": "hi"}]})]


async def test_a_follow_up_carries_its_own_request_metadata_to_the_backend() -> None:
    import dataclasses
    import shutil
    import tempfile

    from aiohttp import web

    from tests.backends.conftest import Recorder, fake_backend, inbound, make_harness, user_message

    async def answer(request: web.Request, body: dict[str, Any], n: int) -> web.Response:
        state = "TASK_STATE_INPUT_REQUIRED" if n == 1 else "TASK_STATE_COMPLETED"
        return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": {"task": {
            "id": "backend-task", "contextId": body["params"]["message"]["contextId"],
            "status": {"state": state}}}})

    directory = Path(tempfile.mkdtemp(prefix="anet-a2a-"))
    try:
        task = dataclasses.replace(inbound("first"), metadata={"turn": 1})
        recorder = Recorder()
        recorder.replies.put_nowait((user_message("second", taskId=task.task_id), {"turn": 2}))
        async with fake_backend(directory / "b.sock", answer) as backend:
            await make_harness(f"unix://{directory / 'b.sock'}").serve(task, recorder)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    assert [post["params"]["metadata"]["turn"] for post in backend.posts] == [1, 2]
