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
from tests.a2a.local import FILE_BYTES, Local, rpc, two_nodes
from tests.support.messages import user_message
from tests.support.waiting import eventually

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
    answer = await rpc(http, local, "SendMessage", {"message": user_message("message me", "m-1")})
    reply = answer["result"]["message"]
    assert reply["parts"] == [{"text": "a message, no task"}]
    assert reply["role"] == "ROLE_AGENT" and reply["metadata"] == {"kept": True}
    assert "taskId" not in reply and reply["contextId"]
    # The same (contextId, messageId) again: the same Message, nothing sent twice.
    again = await rpc(http, local, "SendMessage", {"message": user_message(
        "message me", "m-1", contextId=reply["contextId"])})
    assert again["result"]["message"] == reply
    assert len(local.agent.seen) == 1

    async with http.post(f"{local.agent_url()}/rest/message:send", json={
            "message": user_message("message rest", "m-2")}, headers=local.headers()) as response:
        assert response.status == 200
        assert (await response.json())["message"]["parts"] == [{"text": "a message, no task"}]

    events = await stream(http, local, "SendStreamingMessage",
                          {"message": user_message("message stream", "m-3")})
    assert [list(event) for event in events] == [["message"]]
    # The node keeps its record of the exchange as a completed task.
    tasks = (await rpc(http, local, "ListTasks", {}))["result"]["tasks"]
    assert len(tasks) == 3 and {t["status"]["state"] for t in tasks} == {"TASK_STATE_COMPLETED"}
    assert all(t["metadata"]["anet.message_reply"] is True for t in tasks)


async def test_request_metadata_reaches_the_agent_and_message_metadata_is_unchanged(
        local: Local, http) -> None:
    sent = user_message("hello", "m-1") | {"metadata": {"client": {"trace": 7}}}
    await rpc(http, local, "SendMessage", {"message": sent,
                                           "metadata": {"request": "level", "n": 1}})
    offered = local.agent.seen[0]
    assert offered.metadata == {"request": "level", "n": 1}
    assert offered.message["metadata"] == {"client": {"trace": 7}}
    assert offered.message["messageId"] == "m-1" and offered.message["parts"] == sent["parts"]


async def test_the_agent_learns_which_sends_wait_for_the_end_alone(local: Local, http) -> None:
    """Only a blocking SendMessage shows its client no progress (``InboundTask.blocking``): a
    stream and a send that returns at once follow the task as it runs."""
    await rpc(http, local, "SendMessage", {"message": user_message("hello", "m-1")})
    await rpc(http, local, "SendMessage", {"message": user_message("hello", "m-2"),
                                           "configuration": {"returnImmediately": True}})
    await stream(http, local, "SendStreamingMessage", {"message": user_message("hello", "m-3")})
    assert await eventually(lambda: len(local.agent.seen) == 3)
    assert {task.message["messageId"]: task.blocking for task in local.agent.seen} == {
        "m-1": True, "m-2": False, "m-3": False}


async def test_a_send_does_not_wait_for_the_remote_operator(local: Local, http) -> None:
    answer = await rpc(http, local, "SendMessage", {"message": user_message("inbox please")})
    task = answer["result"]["task"]
    assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
    assert task["metadata"]["anet.reason"] == "queued_for_operator"
    events = await stream(http, local, "SendStreamingMessage",
                          {"message": user_message("inbox again", "m-2")})
    last = events[-1].get("statusUpdate") or events[-1]["task"]  # the update may come first
    assert last["metadata"]["anet.reason"] == "queued_for_operator"
    assert await eventually(lambda: len(local.remote.tasks.inbox()) == 2)


async def test_streams_carry_file_metadata_and_get_task_the_bytes(local: Local, http) -> None:
    events = await stream(http, local, "SendStreamingMessage",
                          {"message": user_message("file please")})
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
