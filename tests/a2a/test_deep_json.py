"""Deeply nested JSON and requests aiohttp cannot parse: an answer, never a 500 or a traceback."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import aiohttp
import pytest

from anet_core.util.strictjson import MAX_DEPTH, parse_json
from tests.a2a.local import Local
from tests.support.nodes import running_node
from tests.support.processes import raw_request


def nested(depth: int) -> str:
    return "[" * depth + "]" * depth


@pytest.fixture
def no_tracebacks(caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING)
    yield caplog
    tracebacks = [record for record in caplog.records if record.exc_info]
    assert not tracebacks, tracebacks[0].getMessage()


def test_the_limit() -> None:
    assert parse_json(nested(MAX_DEPTH)) is not None
    for depth in (MAX_DEPTH + 1, 1000, 200_000):
        with pytest.raises(ValueError, match="nests deeper"):
            parse_json(nested(depth))


async def test_deep_bodies_on_both_bindings(local: Local, http, no_tracebacks) -> None:
    headers = local.headers(**{"Content-Type": "application/json"})
    deep_params = ('{"jsonrpc":"2.0","id":3,"method":"SendMessage","params":{"message":'
                   '{"messageId":"m","role":"ROLE_USER","parts":[{"data":' + nested(1000)
                   + "}]}}}")
    for body in (nested(1000), deep_params):
        async with http.post(local.agent_url() + "/jsonrpc", data=body,
                             headers=headers) as response:
            assert response.status == 200
            assert (await response.json())["error"]["code"] == -32700
        async with http.post(local.agent_url() + "/rest/message:send", data=body,
                             headers=headers) as response:
            assert response.status == 400
    # With a bad version too: the early error reads the id of the body without failing on it.
    async with http.post(local.agent_url() + "/jsonrpc", data=nested(1000),
                         headers={**headers, "A2A-Version": "9.0"}) as response:
        assert response.status == 200 and (await response.json())["id"] is None
    assert local.agent.seen == []


async def test_control_plane_deep_body(tmp_path: Path, no_tracebacks) -> None:
    async with running_node(tmp_path / "node") as node:
        address = node.paths.control_addr.read_text().strip()
        token = node.paths.control_token.read_text().strip()
        async with aiohttp.ClientSession() as http, http.post(
                f"http://{address}/tasks/cancel", data='{"taskId": ' + nested(1000) + "}",
                headers={"Authorization": f"Bearer {token}"}) as response:
            assert response.status == 400


async def test_a_request_line_over_the_limit_logs_one_line(local: Local, no_tracebacks) -> None:
    answer = await asyncio.to_thread(raw_request, local.address, b"GET /" + b"a" * 10_000
                                     + b" HTTP/1.1\r\nHost: " + local.address.encode()
                                     + b"\r\n\r\n")
    assert b" 400 " in answer.split(b"\r\n")[0]
    await asyncio.sleep(0.05)
    lines = [record for record in no_tracebacks.records if record.name == "aiohttp.server"]
    assert len(lines) == 1 and "8190" in lines[0].getMessage()
