"""Backends that misbehave: the requester gets a neutral failure (the detail is in the evidence
and the log) or the retry policy applies, and no message is sent twice."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.backends.harness import completed, fake_backend, inbound, make_harness

pytestmark = pytest.mark.timeout(30)


async def test_a_backend_that_hangs_fails_the_task(sock_dir: Path) -> None:
    async def hang(request: web.Request, body: dict[str, Any], n: int) -> web.Response:
        await asyncio.sleep(30)
        raise AssertionError("unreachable")

    async with fake_backend(sock_dir / "a.sock", hang) as backend:
        harness = make_harness(f"unix://{sock_dir}/a.sock", idle_timeout_s=0.5,
                               give_up_after="5s")
        recorder = await harness.serve(inbound("hello"))
    assert recorder.kinds()[-1] == "fail"
    assert recorder.events[-1][1] == "the agent's backend did not answer in time"
    assert len(backend.posts) == 1
    assert harness.evidence_kinds() == ["backends.failed"]
    assert "sent nothing" in harness.evidence[0][1]["reason"]


async def test_a_backend_that_closes_mid_response_is_not_asked_again(sock_dir: Path) -> None:
    async def cut(request: web.Request, body: dict[str, Any], n: int) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        response.content_length = 1000
        await response.prepare(request)
        await response.write(b'{"jsonrpc": "2.0", "id": ')
        assert request.transport is not None
        request.transport.close()
        return response

    async with fake_backend(sock_dir / "a.sock", cut) as backend:
        harness = make_harness(f"unix://{sock_dir}/a.sock", give_up_after="5s")
        recorder = await harness.serve(inbound("hello"))
    assert recorder.kinds() == ["fail"] and "broke off" in harness.evidence[0][1]["reason"]
    assert len(backend.posts) == 1


@pytest.mark.parametrize("body, says", [
    ({"jsonrpc": "2.0", "id": "ID", "result": {"task": {"status": {"state": "NOPE"}}}},
     "not valid A2A"),
    ({"jsonrpc": "2.0", "id": "ID", "error": {"code": -32009, "message": "Version"}},
     "VersionNotSupportedError"),
    ({"jsonrpc": "2.0", "id": "other", "result": {}}, "wrong id"),
    ("not json at all", "not JSON"),
])
async def test_invalid_a2a_fails_clearly(sock_dir: Path, body: Any, says: str) -> None:
    async def invalid(request: web.Request, sent: dict[str, Any], n: int) -> web.Response:
        if isinstance(body, str):
            return web.Response(text=body, content_type="application/json")
        return web.json_response({**body, "id": sent["id"] if body["id"] == "ID" else body["id"]})

    async with fake_backend(sock_dir / "a.sock", invalid) as backend:
        harness = make_harness(f"unix://{sock_dir}/a.sock", give_up_after="5s")
        recorder = await harness.serve(inbound("hello"))
    assert recorder.kinds() == ["fail"] and says in harness.evidence[0][1]["reason"]
    assert recorder.events[0][1] == "the agent's backend failed on this task"
    assert len(backend.posts) == 1


async def test_a_50_mib_answer_is_refused(sock_dir: Path) -> None:
    async def huge(request: web.Request, body: dict[str, Any], n: int) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)  # chunked: no length announced
        chunk = b" " * (1024 * 1024)
        for _ in range(50):
            await response.write(chunk)
        return response

    async with fake_backend(sock_dir / "a.sock", huge) as backend:
        harness = make_harness(f"unix://{sock_dir}/a.sock")
        recorder = await harness.serve(inbound("hello"))
    assert recorder.kinds() == ["fail"] and "larger than" in harness.evidence[0][1]["reason"]
    assert len(backend.posts) == 1


async def test_a_backend_that_disappears_and_comes_back_gets_the_message_once(
        sock_dir: Path) -> None:
    async def fine(request: web.Request, body: dict[str, Any], n: int) -> web.Response:
        return web.json_response(completed(body["id"], "back again"))

    harness = make_harness(f"unix://{sock_dir}/a.sock", give_up_after="10s")
    serving = asyncio.create_task(harness.serve(inbound("hello")))
    await asyncio.sleep(0.4)  # a few attempts find no socket
    assert not serving.done()
    async with fake_backend(sock_dir / "a.sock", fine) as backend:
        recorder = await serving
    assert recorder.texts("artifact") == ["back again"] and recorder.kinds()[-1] == "complete"
    assert len(backend.posts) == 1
    assert harness.evidence_kinds() == ["backends.forwarded"]
