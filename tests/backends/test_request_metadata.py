"""Request-level metadata and the token on the way to a backend, and a backend that answers
with a Message (the forwarder's part of what tests/a2a/test_replies.py checks through the local
endpoint)."""

from __future__ import annotations

import dataclasses
import shutil
import tempfile
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.backends.harness import Recorder, fake_backend, inbound, make_harness
from tests.support.messages import user_message


async def test_the_forwarder_sends_request_metadata_and_passes_a_message_reply() -> None:
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
    async def answer(request: web.Request, body: dict[str, Any], n: int) -> web.Response:
        state = "TASK_STATE_INPUT_REQUIRED" if n == 1 else "TASK_STATE_COMPLETED"
        return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": {"task": {
            "id": "backend-task", "contextId": body["params"]["message"]["contextId"],
            "status": {"state": state}}}})

    directory = Path(tempfile.mkdtemp(prefix="anet-a2a-"))
    try:
        task = dataclasses.replace(inbound("first"), metadata={"turn": 1})
        recorder = Recorder()
        recorder.replies.put_nowait((user_message("second", "m-2", contextId="requester-ctx",
                                                  taskId=task.task_id), {"turn": 2}))
        async with fake_backend(directory / "b.sock", answer) as backend:
            await make_harness(f"unix://{directory / 'b.sock'}").serve(task, recorder)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    assert [post["params"]["metadata"]["turn"] for post in backend.posts] == [1, 2]


async def test_a_replaced_token_goes_with_the_next_forward() -> None:
    async def answer(request: web.Request, body: dict[str, Any], n: int) -> web.Response:
        return web.json_response({"jsonrpc": "2.0", "id": body["id"], "result": {"message": {
            "messageId": f"r-{n}", "role": "ROLE_AGENT", "parts": [{"text": "hi"}]}}})

    directory = Path(tempfile.mkdtemp(prefix="anet-a2a-"))
    token_file = directory / "token"
    try:
        harness = make_harness(f"unix://{directory / 'b.sock'}", token_file=token_file)
        async with fake_backend(directory / "b.sock", answer) as backend:
            token_file.write_text("first-token\n")
            await harness.serve(inbound("one"))
            await harness.serve(inbound("two"))
            token_file.write_text("the-second-token\n")
            await harness.serve(inbound("three"))
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    assert backend.authorizations == ["Bearer first-token"] * 2 + ["Bearer the-second-token"]
