"""The control plane: loopback only, its own token, Host and Origin checks."""

from __future__ import annotations

from pathlib import Path

import aiohttp
import pytest

from tests.conftest import running_node


@pytest.fixture
async def control(tmp_path: Path):
    async with running_node(tmp_path / "node") as node:
        address = node.paths.control_addr.read_text().strip()
        token = node.paths.control_token.read_text().strip()
        async with aiohttp.ClientSession() as session:
            yield session, address, token


async def get(session, url: str, **headers: str) -> int:
    async with session.get(url, headers=headers) as response:
        return response.status


async def test_status_needs_the_control_token(control) -> None:
    session, address, token = control
    url = f"http://{address}/core/status"
    assert await get(session, url, Authorization=f"Bearer {token}") == 200
    assert await get(session, url) == 401
    assert await get(session, url, Authorization="Bearer wrong") == 401
    assert await get(session, url, Authorization=f"Bearer  {token}") == 401
    assert await get(session, url, Authorization=f"Basic {token}") == 401


async def test_a_foreign_host_header_is_misdirected(control) -> None:
    session, address, token = control
    port = address.rsplit(":", 1)[1]
    url = f"http://{address}/core/status"
    auth = f"Bearer {token}"
    assert await get(session, url, Host=f"evil.example:{port}", Authorization=auth) == 421
    assert await get(session, url, Host="127.0.0.1:1", Authorization=auth) == 421
    assert await get(session, url, Host=f"localhost:{port}", Authorization=auth) == 200


async def test_a_request_from_a_web_page_is_forbidden(control) -> None:
    session, address, token = control
    status = await get(session, f"http://{address}/core/status", Origin="http://example.com",
                       Authorization=f"Bearer {token}")
    assert status == 403


async def test_the_control_plane_listens_on_loopback_only(control) -> None:
    _, address, _ = control
    assert address.startswith("127.0.0.1:")
