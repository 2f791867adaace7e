"""A task that waits for the remote operator says so in words a person can read."""

from __future__ import annotations

import json

from tests.a2a.local import Local, rpc
from tests.support.messages import user_message
from tests.support.waiting import eventually


async def test_a_task_in_the_remote_inbox_has_a_status_message(local: Local, http) -> None:
    sent = await rpc(http, local, "SendMessage", {"message": user_message("inbox please")})
    task = sent["result"]["task"]
    assert task["metadata"]["anet.reason"] == "queued_for_operator"
    status = task["status"]
    assert status["state"] == "TASK_STATE_SUBMITTED"
    text = status["message"]["parts"][0]["text"]
    assert "operator" in text
    assert status["message"]["role"] == "ROLE_AGENT"
    got = await rpc(http, local, "GetTask", {"id": task["id"]})
    assert got["result"]["status"]["message"]["parts"][0]["text"] == text
    await eventually(lambda: local.remote.tasks.provider.inbox())
    # Rendered for the client only: the task's history holds the requester's message alone.
    assert [m["role"] for m in got["result"]["history"]] == ["ROLE_USER"]


async def test_a_stream_of_such_a_task_says_so_too(local: Local, http) -> None:
    body = {"jsonrpc": "2.0", "id": 2, "method": "SendStreamingMessage",
            "params": {"message": user_message("inbox stream", "m-s")}}
    async with http.post(f"{local.agent_url()}/jsonrpc", json=body,
                         headers=local.headers()) as response:
        events = [json.loads(line[5:]) for line in (await response.text()).splitlines()
                  if line.startswith("data:")]
    last = events[-1]["result"]
    status = (last.get("statusUpdate") or last.get("task"))["status"]
    assert "operator" in status["message"]["parts"][0]["text"]
