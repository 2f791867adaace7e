"""What a failed forward tells the remote requester: a neutral sentence, never this machine's
socket paths, HTTP statuses or errors; those stay in the log and the evidence chain."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from tests.backends.harness import fake_backend, inbound, make_harness

pytestmark = pytest.mark.timeout(30)


async def test_an_unreachable_socket_is_not_named_to_the_requester(
        sock_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    path = sock_dir / "secret-agent.sock"
    harness = make_harness(f"unix://{path}", give_up_after="0")
    recorder = await harness.serve(inbound("hello"))
    told = recorder.events[-1][1]
    assert recorder.kinds() == ["fail"] and told == "the agent's backend could not be reached"
    assert str(sock_dir) not in told
    assert str(sock_dir) in harness.evidence[0][1]["reason"]
    assert str(sock_dir) in caplog.text


async def test_a_backend_error_is_not_passed_on(sock_dir: Path) -> None:
    async def answer(request: web.Request, body: dict[str, Any], n: int) -> web.Response:
        return web.Response(status=502, text="upstream at 10.0.0.7:8443 refused")

    path = sock_dir / "a.sock"
    async with fake_backend(path, answer):
        harness = make_harness(f"unix://{path}")
        recorder = await harness.serve(inbound("hello"))
    assert recorder.events[-1][1] == "the agent's backend failed on this task"
    assert "HTTP 502" in harness.evidence[0][1]["reason"]
