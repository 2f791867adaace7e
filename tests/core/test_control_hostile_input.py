"""The control plane answers hostile bodies with a 400 that names the problem, never a 500."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import aiohttp
import pytest

from tests.support.nodes import running_node
from tests.support.processes import raw_request


@pytest.fixture
async def control(tmp_path: Path, caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.WARNING)
    async with running_node(tmp_path / "node") as node:
        address = node.paths.control_addr.read_text().strip()
        token = node.paths.control_token.read_text().strip()
        async with aiohttp.ClientSession(base_url=f"http://{address}", headers={
                "Authorization": f"Bearer {token}"}) as session:
            yield session, address
    tracebacks = [record for record in caplog.records if record.exc_info]
    assert not tracebacks, tracebacks[0].getMessage()


async def post(session: aiohttp.ClientSession, path: str, body: bytes) -> tuple[int, dict]:
    async with session.post(path, data=body,
                            headers={"Content-Type": "application/json"}) as response:
        return response.status, await response.json()


@pytest.mark.parametrize("path", ["/tasks/cancel", "/tasks/reject"])
async def test_lone_surrogates_in_ids_are_refused(control, path: str) -> None:
    session, _ = control
    status, body = await post(session, path, b'{"taskId": "\\ud800abc"}')
    assert status == 400 and "surrogate" in body["message"]


async def test_bodies_that_are_not_strict_json_are_refused(control) -> None:
    session, _ = control
    aid = b'"' + b"a" * 32 + b'"'
    for raw in (b'{"aid": ' + aid + b', "text": "\\udc00"}', b'{"aid": ' + aid
                + b', "text": "x", "skill": "' + b"s" * 201 + b'"}', b"not json", b"\xff\xfe"):
        status, body = await post(session, "/tasks/send", raw)
        assert status == 400, (raw, body)
        assert body["error"] in {"bad-request", "invalid-params"}, body


async def test_hub_join_with_a_body_that_is_not_json(control) -> None:
    session, _ = control
    for raw in (b"nope", b"", b'["ws://x"]', b'{"url": "\\ud800"}'):
        status, body = await post(session, "/hub/join", raw)
        assert status == 400, (raw, body)


async def test_authorization_that_is_not_utf8_is_401(control) -> None:
    _, address = control
    answer = await asyncio.to_thread(raw_request, address, (
        b"GET /core/status HTTP/1.1\r\nHost: " + address.encode()
        + b"\r\nAuthorization: Bearer \xff\xfe\r\nConnection: close\r\n\r\n"))
    assert answer.startswith(b"HTTP/1.1 401 "), answer[:80]
