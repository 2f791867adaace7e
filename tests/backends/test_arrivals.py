"""What a streaming backend sends together is reported together; what it sends apart, apart."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from anet_backends.arrivals import READ_AHEAD, Arrivals
from tests.backends.harness import Recorder, fake_backend, inbound, make_harness
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(30)

TASK = "backend-task"


def status(state: str, note: str | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"state": state}
    if note is not None:
        body["message"] = {"messageId": "n1", "role": "ROLE_AGENT", "parts": [{"text": note}]}
    return {"statusUpdate": {"taskId": TASK, "contextId": "c", "status": body}}


def chunk(text: str, *, append: bool = False) -> dict[str, Any]:
    return {"artifactUpdate": {"taskId": TASK, "contextId": "c", "append": append,
                               "artifact": {"artifactId": "a1", "parts": [{"text": text}]}}}


SUBMITTED = {"task": {"id": TASK, "contextId": "c", "status": {"state": "TASK_STATE_SUBMITTED"}}}


def sse(request_id: Any, *events: dict[str, Any]) -> bytes:
    return b"".join(b"data: " + json.dumps({"jsonrpc": "2.0", "id": request_id,
                                             "result": event}).encode() + b"\n\n"
                    for event in events)


async def stream(request: web.Request) -> web.StreamResponse:
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
    await response.prepare(request)
    return response


async def test_a_turn_sent_at_once_is_one_completion_with_its_artifacts(sock_dir: Path) -> None:
    async def answer(request: web.Request, body: dict[str, Any], n: int) -> web.StreamResponse:
        response = await stream(request)
        await response.write(sse(body["id"], SUBMITTED, status("TASK_STATE_WORKING"),
                                 chunk("hello "), chunk("world", append=True),
                                 status("TASK_STATE_COMPLETED")))
        await response.write_eof()
        return response

    path = sock_dir / "a.sock"
    async with fake_backend(path, answer, streaming=True):
        recorder = await make_harness(f"unix://{path}").serve(inbound("hi"))
    # no WORKING and no chunk reported apart: the completion carries the whole artifact
    assert recorder.events == [
        ("artifact", {"artifactId": "a1", "parts": [{"text": "hello "}, {"text": "world"}]}),
        ("complete", None)]
    assert recorder.completed_with == [["a1"]]


async def test_a_working_note_sent_with_the_completion_is_still_its_own_update(
        sock_dir: Path) -> None:
    async def answer(request: web.Request, body: dict[str, Any], n: int) -> web.StreamResponse:
        response = await stream(request)
        await response.write(sse(body["id"], SUBMITTED, status("TASK_STATE_WORKING", "reading"),
                                 chunk("hello"), status("TASK_STATE_COMPLETED")))
        await response.write_eof()
        return response

    path = sock_dir / "a.sock"
    async with fake_backend(path, answer, streaming=True):
        recorder = await make_harness(f"unix://{path}").serve(inbound("hi"))
    assert recorder.kinds() == ["working", "artifact", "complete"]
    assert recorder.events[0][1]["parts"] == [{"text": "reading"}]
    assert recorder.completed_with == [[]]


async def test_progress_sent_apart_is_reported_as_it_arrives(sock_dir: Path) -> None:
    recorder = Recorder()

    async def answer(request: web.Request, body: dict[str, Any], n: int) -> web.StreamResponse:
        response = await stream(request)
        await response.write(sse(body["id"], SUBMITTED, status("TASK_STATE_WORKING"),
                                 chunk("hello ")))
        # the rest only once the requester was told of the first part
        await eventually(lambda: recorder.kinds() == ["working", "artifact"],
                         "the progress reported before the end")
        await response.write(sse(body["id"], chunk("world", append=True),
                                 status("TASK_STATE_COMPLETED")))
        await response.write_eof()
        return response

    path = sock_dir / "a.sock"
    async with fake_backend(path, answer, streaming=True):
        await make_harness(f"unix://{path}").serve(inbound("hi"), recorder)
    # the second part extends an artifact the requester already has: it is sent as such
    assert recorder.kinds() == ["working", "artifact", "artifact", "complete"]
    assert recorder.appended == [False, True]
    assert recorder.completed_with == [[]]


async def test_a_failure_of_the_stream_comes_after_the_events_before_it() -> None:
    async def events() -> Any:
        yield 1
        yield 2
        raise ConnectionResetError("gone")

    seen: list[int] = []
    async with Arrivals(events()) as arrivals:
        with pytest.raises(ConnectionResetError):
            while (batch := await arrivals.next(5.0)) is not None:
                seen += batch
    assert seen == [1, 2]


async def test_a_wait_that_times_out_loses_nothing() -> None:
    go = asyncio.Event()

    async def events() -> Any:
        await go.wait()
        yield "late"

    async with Arrivals(events()) as arrivals:
        with pytest.raises(TimeoutError):
            await arrivals.next(0.01)
        go.set()
        assert await arrivals.next(5.0) == ["late"]
        assert await arrivals.next(5.0) is None


async def test_a_backend_faster_than_the_reports_waits_for_them() -> None:
    read = 0

    async def events() -> Any:
        nonlocal read
        for event in range(3 * READ_AHEAD):
            read += 1
            yield event

    async with Arrivals(events()) as arrivals:
        first = await arrivals.next(5.0)
        assert first is not None
        await asyncio.sleep(0)  # the reader runs until the queue is full, no further
        assert len(first) <= READ_AHEAD and read - len(first) <= READ_AHEAD + 1
        rest: list[int] = []
        while (batch := await arrivals.next(5.0)) is not None:
            rest += batch
    assert first + rest == list(range(3 * READ_AHEAD))


async def test_progress_that_came_before_a_broken_stream_still_reaches_the_requester(
        sock_dir: Path) -> None:
    async def answer(request: web.Request, body: dict[str, Any], n: int) -> web.StreamResponse:
        response = await stream(request)
        await response.write(sse(body["id"], SUBMITTED, chunk("partial")))
        await response.write(b"data: {not json}\n\n")
        await response.write_eof()
        return response

    path = sock_dir / "a.sock"
    async with fake_backend(path, answer, streaming=True):
        recorder = await make_harness(f"unix://{path}").serve(inbound("hi"))
    assert recorder.kinds() == ["artifact", "fail"]
    assert recorder.events[0][1]["parts"] == [{"text": "partial"}]
