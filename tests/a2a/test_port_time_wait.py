"""A connection the listener closed lingers in TIME_WAIT for about a minute: it holds no port.
A restart within that minute binds the recorded port again and keeps the token."""

from __future__ import annotations

import socket
from pathlib import Path

import aiohttp
import pytest

from anet_core.control.loopback import bind_loopback
from tests.a2a.local import two_nodes


def _time_wait_on(port: int) -> None:
    """Leave a connection of a listener on ``port`` in TIME_WAIT (the listener closes first),
    then close the listener."""
    listener = bind_loopback(port)
    listener.setblocking(True)
    client = socket.create_connection(("127.0.0.1", port))
    accepted, _ = listener.accept()
    accepted.close()  # the listener's side closes first: its end goes to TIME_WAIT
    client.recv(1)
    client.close()
    listener.close()


def test_bind_loopback_ignores_time_wait() -> None:
    port = bind_loopback(0).getsockname()[1]
    _time_wait_on(port)
    again = bind_loopback(port)
    try:  # a listener, even one that set SO_REUSEADDR too, still holds the port
        with pytest.raises(OSError):
            bind_loopback(port)
    finally:
        again.close()


async def test_restart_after_a_closed_connection_keeps_port_and_token(tmp_path: Path) -> None:
    async with two_nodes(tmp_path) as local:
        address, token = local.address, local.token
        async with aiohttp.ClientSession() as http, http.get(
                local.base + "/a2a/v1/agents/nobody", headers=local.headers(Connection="close")
        ) as response:
            assert response.status == 404
    async with two_nodes(tmp_path) as local:
        assert local.node.listeners["a2a"].state == "up", local.node.listeners["a2a"].detail
        assert not local.state.conflict_file.exists()
        assert (local.address, local.token) == (address, token)
