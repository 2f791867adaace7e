"""Streams stay audibly alive while a task works, and what Hermes sends again after giving up on
a silent stream is recognised as the message it already sent."""

from __future__ import annotations

import asyncio
import json
import secrets

from anet_a2a import sse
from tests.a2a.local import Local, rpc
from tests.support.waiting import eventually

HERMES_HEADERS = {"Content-Type": "application/json", "A2A-Version": "1.0",
                  "User-Agent": "Hermes-A2A/1.0"}


def hermes_message(text: str) -> dict:
    """A message exactly as Hermes's A2A client writes it (its plugins/platforms/a2a)."""
    return {"role": "ROLE_USER", "parts": [{"text": text, "mediaType": "text/plain"}],
            "messageId": secrets.token_hex(16), "contextId": f"ctx-{secrets.token_hex(8)}"}


def hermes_call(method: str, message: dict) -> dict:
    return {"jsonrpc": "2.0", "id": f"task-{secrets.token_hex(8)}", "method": method,
            "params": {"message": message}}


async def test_a_working_task_streams_keepalive_comments(local: Local, http,
                                                        monkeypatch) -> None:
    monkeypatch.setattr(sse, "KEEPALIVE_S", 0.2)
    body = hermes_call("SendStreamingMessage", hermes_message("slow work"))
    async with http.post(f"{local.agent_url()}/jsonrpc", json=body, headers=local.headers(
            **HERMES_HEADERS, Accept="text/event-stream")) as response:
        seen: list[bytes] = []
        comment = sse.KEEPALIVE.split(b"\n")[0] + b"\n"
        async with asyncio.timeout(10):
            # The task's events, then silence while it works: comments, at least two.
            while not any(line.startswith(b"data:") for line in seen) \
                    or seen[-4:].count(comment) < 2:
                seen.append(await response.content.readline())
    task_id = next(json.loads(line[5:])["result"]["task"]["id"] for line in seen
                   if line.startswith(b"data:") and b'"task"' in line)
    await rpc(http, local, "CancelTask", {"id": task_id})


async def test_hermes_resending_a_stream_as_send_message_is_one_task(local: Local,
                                                                    http) -> None:
    message = hermes_message("hello from hermes")
    stream = hermes_call("SendStreamingMessage", message)
    async with http.post(f"{local.agent_url()}/jsonrpc", json=stream, headers=local.headers(
            **HERMES_HEADERS, Accept="text/event-stream")) as response:
        first = await response.content.readline()  # then Hermes gives up on the stream
    streamed = json.loads(first[5:])["result"]
    again = hermes_call("SendMessage", message)  # the same message, as Hermes resends it
    async with http.post(f"{local.agent_url()}/jsonrpc", json=again,
                         headers=local.headers(**HERMES_HEADERS,
                                               Accept="application/json")) as response:
        answer = await response.json()
    assert answer["id"] == again["id"]
    result = answer["result"]
    task_id = (streamed.get("task") or streamed.get("statusUpdate", {})).get("id") \
        or streamed["statusUpdate"]["taskId"]
    assert result["task"]["id"] == task_id
    await eventually(lambda: local.agent.seen)
    await asyncio.sleep(0.2)
    assert len(local.agent.seen) == 1  # the agent got the message once
