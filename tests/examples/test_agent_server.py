"""How the example agents listen: socket files, loopback, tokens, and the command line."""

from __future__ import annotations

import asyncio
import re
import signal
import socket
import stat
import sys
from pathlib import Path

import httpx
import pytest

from examples.agent_server import (
    SOCKET_MODE,
    bind_listener,
    bind_loopback_port,
    bind_unix_socket,
    read_token_file,
)

pytestmark = pytest.mark.timeout(60)

REPO_ROOT = Path(__file__).resolve().parents[2]
PROCESS_TIMEOUT_S = 20


def test_unix_socket_is_created_with_a_private_mode_and_removed_on_close(short_tmp: Path) -> None:
    path = short_tmp / "a.sock"
    listener = bind_unix_socket(path)
    assert stat.S_IMODE(path.stat().st_mode) == SOCKET_MODE
    assert listener.base_url == "http://localhost"
    listener.close()
    assert not path.exists()


def test_a_stale_socket_file_is_replaced(short_tmp: Path) -> None:
    path = short_tmp / "a.sock"
    stale = socket.socket(socket.AF_UNIX)
    stale.bind(str(path))
    stale.close()  # the file stays, nobody listens: what a crashed server leaves behind
    bind_unix_socket(path).close()


def test_a_live_socket_is_never_taken_over(short_tmp: Path) -> None:
    path = short_tmp / "a.sock"
    first = bind_unix_socket(path)
    try:
        with pytest.raises(OSError, match="another server is listening"):
            bind_unix_socket(path)
    finally:
        first.close()


def test_a_file_that_is_not_a_socket_is_left_alone(short_tmp: Path) -> None:
    path = short_tmp / "precious.txt"
    path.write_text("keep me")
    with pytest.raises(FileExistsError, match="is not a socket"):
        bind_unix_socket(path)
    assert path.read_text() == "keep me"


def test_tcp_listens_on_loopback_only() -> None:
    listener = bind_loopback_port(0)
    try:
        host, port = listener.sock.getsockname()
        assert host == "127.0.0.1" and port > 0
        assert listener.base_url == f"http://127.0.0.1:{port}"
    finally:
        listener.close()


def test_exactly_one_place_to_listen() -> None:
    with pytest.raises(ValueError, match="exactly one"):
        bind_listener(None, None)
    with pytest.raises(ValueError, match="exactly one"):
        bind_listener("/tmp/x.sock", 1)


@pytest.mark.parametrize("content", ["", "  \n", "two words\n"])
def test_token_file_must_hold_one_token(tmp_path: Path, content: str) -> None:
    path = tmp_path / "token"
    path.write_text(content)
    with pytest.raises(ValueError, match="must hold one token"):
        read_token_file(path)


def test_token_file_whitespace_around_the_token_is_ignored(tmp_path: Path) -> None:
    path = tmp_path / "token"
    path.write_text("  s3cret \n")
    assert read_token_file(path) == "s3cret"


async def start_agent(module: str, *args: str) -> asyncio.subprocess.Process:
    return await asyncio.create_subprocess_exec(
        sys.executable, "-m", module, *args, cwd=REPO_ROOT,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE)


async def stop(process: asyncio.subprocess.Process) -> int:
    if process.returncode is None:
        process.send_signal(signal.SIGTERM)
    try:
        async with asyncio.timeout(PROCESS_TIMEOUT_S):
            return await process.wait()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()


@pytest.mark.parametrize("module", ["examples.text_agent", "examples.tck_agent"])
async def test_runs_as_a_module_on_a_free_port_and_stops_on_sigterm(tmp_path: Path,
                                                                      module: str) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("t0ken\n")
    process = await start_agent(module, "--port", "0", "--token-file", str(token_file))
    try:
        assert process.stderr is not None
        async with asyncio.timeout(PROCESS_TIMEOUT_S):
            line = (await process.stderr.readline()).decode()
        found = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
        assert found, line
        async with httpx.AsyncClient(base_url=found[1], timeout=10) as http:
            refused = await http.get("/.well-known/agent-card.json")
            card = await http.get("/.well-known/agent-card.json",
                                  headers={"Authorization": "Bearer t0ken"})
        assert refused.status_code == 401
        assert card.json()["supportedInterfaces"][0]["url"] == found[1] + "/a2a/jsonrpc"
    finally:
        assert await stop(process) == 0


async def test_socket_file_is_removed_when_the_agent_stops(short_tmp: Path) -> None:
    path = short_tmp / "agent.sock"
    process = await start_agent("examples.text_agent", "--socket", str(path))
    try:
        async with asyncio.timeout(PROCESS_TIMEOUT_S):
            while not path.exists():
                await asyncio.sleep(0.05)
        transport = httpx.AsyncHTTPTransport(uds=str(path))
        async with httpx.AsyncClient(transport=transport, base_url="http://localhost") as http:
            card = await http.get("/.well-known/agent-card.json")
        assert card.json()["name"] == "Text Agent"
        assert "securitySchemes" not in card.json()  # no --token-file, no token asked for
    finally:
        assert await stop(process) == 0
    assert not path.exists()


async def test_a_bad_token_file_is_reported_without_a_traceback(tmp_path: Path) -> None:
    empty = tmp_path / "token"
    empty.write_text("")
    process = await start_agent("examples.text_agent", "--port", "0", "--token-file", str(empty))
    assert process.stderr is not None
    async with asyncio.timeout(PROCESS_TIMEOUT_S):
        err = (await process.stderr.read()).decode()
        # Wait, don't signal: Popen.send_signal() polls and would reap the exited child before
        # asyncio's child watcher does, which then reports 255.
        assert await process.wait() == 1
    assert err.startswith("error: token file") and "Traceback" not in err
