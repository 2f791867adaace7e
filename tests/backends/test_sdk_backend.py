"""The built-in kind against a backend served by the official a2a-sdk 1.x server."""

from __future__ import annotations

import asyncio
import uuid
from pathlib import Path

import pytest

from tests.backends.harness import Recorder, inbound, make_harness
from tests.support.messages import user_message
from tests.support.sdk_backend import TOKEN, sdk_backend

pytestmark = pytest.mark.timeout(60)


@pytest.fixture(params=[False, True], ids=["blocking", "streaming"])
def streaming(request: pytest.FixtureRequest) -> bool:
    return request.param


async def test_a_plain_reply_with_its_artifact(sock_dir: Path, token_file: Path,
                                               streaming: bool) -> None:
    path = sock_dir / "a2a.sock"
    async with sdk_backend(path, streaming=streaming, token=TOKEN) as seen:
        harness = make_harness(f"unix://{path}", token_file=token_file)
        task = inbound("hello there")
        recorder = await harness.serve(task)
    assert recorder.kinds()[-1] == "complete"
    assert recorder.texts("artifact") == ["echo: hello there"]
    # messageId unchanged, the requester's context is the backend's, metadata says who asked
    assert seen.messages[0]["messageId"] == task.message["messageId"]
    assert seen.messages[0]["contextId"] == task.context_id
    assert seen.metadata[0] == {"anet.peer_aid": task.peer_aid, "anet.trusted": True}
    # the token went with the card request and with every call
    assert seen.authorizations and set(seen.authorizations) == {f"Bearer {TOKEN}"}
    assert harness.evidence_kinds() == ["backends.forwarded"]
    assert harness.evidence[0][1]["messageId"] == task.message["messageId"]


async def test_several_artifacts_each_reach_the_requester_once(sock_dir: Path, token_file: Path,
                                                               streaming: bool) -> None:
    path = sock_dir / "a2a.sock"
    async with sdk_backend(path, streaming=streaming, token=TOKEN):
        recorder = await make_harness(f"unix://{path}", token_file=token_file).serve(
            inbound("two please"))
    assert recorder.texts("artifact") == ["first", "echo: two please"]
    assert recorder.kinds()[-1] == "complete"


async def test_a_message_reply_reaches_the_requester_as_a_message(sock_dir: Path, token_file: Path,
                                                  streaming: bool) -> None:
    path = sock_dir / "a2a.sock"
    async with sdk_backend(path, streaming=streaming, token=TOKEN):
        recorder = await make_harness(f"unix://{path}", token_file=token_file).serve(
            inbound("msg hi"))
    assert recorder.events[-1][0] == "reply_message"
    assert recorder.texts("reply_message") == ["direct: msg hi"]


async def test_input_required_continues_the_same_backend_task(sock_dir: Path, token_file: Path,
                                                              streaming: bool) -> None:
    path = sock_dir / "a2a.sock"
    async with sdk_backend(path, streaming=streaming, token=TOKEN) as seen:
        harness = make_harness(f"unix://{path}", token_file=token_file)
        recorder = Recorder()
        answer = user_message("blue", f"m-{uuid.uuid4().hex}", contextId="requester-ctx",
                              taskId="requester-task-id")
        recorder.replies.put_nowait(answer)
        await harness.serve(inbound("ask me"), recorder)
    assert "input_required" in recorder.kinds()
    assert recorder.texts("input_required") == ["which colour?"]
    assert recorder.texts("artifact") == ["echo: blue"]
    assert recorder.kinds()[-1] == "complete"
    first, second = seen.messages
    assert second["taskId"] == first["taskId"] and second["contextId"] == first["contextId"]
    assert second["messageId"] == answer["messageId"]
    assert harness.forwarder.tasks == {}


async def test_a_blocking_turn_asks_a_streaming_backend_for_its_end_alone(
        sock_dir: Path, token_file: Path) -> None:
    """A requester that waits for the end only (``InboundTask.blocking``) gets it from one
    SendMessage; the same answer as from the stream another requester follows."""
    path = sock_dir / "a2a.sock"
    async with sdk_backend(path, streaming=True, token=TOKEN) as seen:
        harness = make_harness(f"unix://{path}", token_file=token_file)
        waiting = await harness.serve(inbound("two please", blocking=True))
        following = await harness.serve(inbound("two please"))
    assert seen.accepts == ["application/json", "text/event-stream"]
    for recorder in (waiting, following):
        assert recorder.texts("artifact") == ["first", "echo: two please"]
        assert recorder.kinds()[-1] == "complete"


async def test_each_turn_reaches_the_backend_as_its_requester_waits_for_it(
        sock_dir: Path, token_file: Path) -> None:
    path = sock_dir / "a2a.sock"
    async with sdk_backend(path, streaming=True, token=TOKEN) as seen:
        recorder = Recorder()
        answer = user_message("blue", f"m-{uuid.uuid4().hex}", contextId="requester-ctx",
                              taskId="requester-task-id")
        recorder.replies.put_nowait((answer, {}, False))  # the answer's client follows it
        await make_harness(f"unix://{path}", token_file=token_file).serve(
            inbound("ask me", blocking=True), recorder)
    assert seen.accepts == ["application/json", "text/event-stream"]
    assert recorder.texts("input_required") == ["which colour?"]
    assert recorder.texts("artifact") == ["echo: blue"]


async def test_a_cancel_reaches_the_backend_task(sock_dir: Path, token_file: Path,
                                                 streaming: bool) -> None:
    path = sock_dir / "a2a.sock"
    async with sdk_backend(path, streaming=streaming, token=TOKEN) as seen:
        harness = make_harness(f"unix://{path}", token_file=token_file)
        recorder = Recorder()
        task = inbound("slow job")
        serving = asyncio.create_task(harness.serve(task, recorder))
        async with asyncio.timeout(10):
            while not seen.messages or harness.forwarder.tasks.get(task.task_id) is None \
                    or harness.forwarder.tasks[task.task_id].task_id is None:
                if not streaming and seen.messages:
                    break  # a blocking call names the backend task only in its answer
                await asyncio.sleep(0.02)
        recorder.cancelled.set()
        await serving
    if streaming:
        assert seen.canceled == [seen.messages[0]["taskId"]]
    assert "complete" not in recorder.kinds()


async def test_a_first_turn_held_long_is_announced_as_working(sock_dir: Path,
                                                              token_file: Path) -> None:
    path = sock_dir / "a2a.sock"
    async with sdk_backend(path, streaming=False, token=TOKEN):
        harness = make_harness(f"unix://{path}", token_file=token_file)
        recorder = Recorder()
        task = inbound("slow job")
        serving = asyncio.create_task(harness.serve(task, recorder))
        async with asyncio.timeout(10):
            while "working" not in recorder.kinds():
                await asyncio.sleep(0.05)
        recorder.cancelled.set()
        await serving
