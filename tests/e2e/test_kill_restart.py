"""A daemon killed with a request in flight starts again on its recorded port, token kept."""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from pathlib import Path

import pytest

pytest.importorskip("anet_a2a")

from anet_a2a.state import StateDir
from anet_core.daemon import running_pid
from anet_core.settings import DataPaths
from tests.support.waiting import wait_for

pytestmark = pytest.mark.timeout(120)


def test_sigkill_with_a_request_in_flight(anet, data_dir: Path) -> None:
    anet("init", check=True)
    anet("up", check=True)
    state = StateDir(data_dir / "modules" / "a2a")
    address, token = state.address_file.read_text().strip(), state.token().current()
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=10) as client:
        # A body begun, not finished: the request is in flight when the daemon dies (and the
        # daemon has read all that arrived, so its end closes in order and lingers in
        # TIME_WAIT, as after any answer it closed).
        client.sendall(f"POST /a2a/v1/agents/{'b' * 32}/jsonrpc HTTP/1.1\r\nHost: {address}\r\n"
                       f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                       "Content-Length: 1000\r\n\r\n{\"jsonrpc\"".encode())
        time.sleep(0.5)  # the daemon reads the headers and waits for the rest of the body
        pid = running_pid(DataPaths(data_dir))
        assert pid is not None
        os.kill(pid, signal.SIGKILL)
        wait_for(lambda: running_pid(DataPaths(data_dir)) is None, "the daemon is gone")
        assert client.recv(1) == b""  # the kernel closed the daemon's end first
    anet("up", check=True)
    status = json.loads(anet("status", "--json", check=True).stdout)
    listener = next(item for item in status["listeners"] if item["name"] == "a2a")
    assert listener["state"] == "up", listener["detail"]
    assert state.address_file.read_text().strip() == address
    assert state.token().current() == token
    assert not state.conflict_file.exists()
