"""The checks made before the token or a task's text is written, with real OS accounts."""

from __future__ import annotations

import os
import pwd
import select
import socket
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest

from anet_backends import sockcheck
from anet_core.records import BackendError, BackendStage, BackendTarget
from tests.backends.harness import inbound, make_harness, raw_listener

pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def bare_socket(sock_dir: Path) -> Iterator[tuple[Path, socket.socket]]:
    """A listening socket made by root that nobody accepts on."""
    def make(directory: Path) -> tuple[Path, socket.socket]:
        path = directory / "a2a.sock"
        listener = socket.socket(socket.AF_UNIX)
        listener.bind(str(path))
        listener.listen()
        opened.append(listener)
        return path, listener

    opened: list[socket.socket] = []
    yield make  # type: ignore[misc]
    for listener in opened:
        listener.close()


def nothing_connected(listener: socket.socket) -> bool:
    return not select.select([listener], [], [], 0.1)[0]


async def test_a_socket_in_a_directory_another_user_can_change_is_refused(
        sock_dir: Path, token_file: Path, other_user: pwd.struct_passwd, bare_socket) -> None:
    directory = sock_dir / "theirs"
    directory.mkdir()
    path, listener = bare_socket(directory)
    os.chown(directory, other_user.pw_uid, other_user.pw_gid)
    harness = make_harness(f"unix://{path}", token_file=token_file)
    recorder = await harness.serve(inbound("secret text"))
    assert recorder.kinds() == ["to_inbox"]  # left to the operator
    assert f"directory {directory} can be changed by {other_user.pw_name}" in recorder.events[0][1]
    assert nothing_connected(listener)  # neither the token nor the text went anywhere
    assert harness.evidence == []


async def test_a_group_writable_directory_needs_socket_group(
        sock_dir: Path, other_user: pwd.struct_passwd, bare_socket) -> None:
    directory = sock_dir / "shared"
    directory.mkdir()
    path, _ = bare_socket(directory)
    os.chown(directory, 0, other_user.pw_gid)
    directory.chmod(0o770)
    group = __import__("grp").getgrgid(other_user.pw_gid).gr_name
    target = BackendTarget(match="*", url=f"unix://{path}")
    with pytest.raises(BackendError, match="can be changed by"):
        sockcheck.check_socket_path(target, path)
    trusted = BackendTarget(match="*", url=f"unix://{path}", socket_group=group)
    assert sockcheck.check_socket_path(trusted, path).backend_uid == 0


def test_sticky_world_writable_directories_above_are_accepted(sock_dir: Path,
                                                              bare_socket) -> None:
    assert stat.S_IMODE(os.stat("/tmp").st_mode) & stat.S_ISVTX
    path, _ = bare_socket(sock_dir)
    owner = sockcheck.check_socket_path(BackendTarget(match="*", url=f"unix://{path}"), path)
    assert owner.backend_uid == os.geteuid()


def test_a_world_writable_socket_directory_is_refused(sock_dir: Path, bare_socket) -> None:
    path, _ = bare_socket(sock_dir)
    sock_dir.chmod(0o1777)
    with pytest.raises(BackendError, match="can be changed by every user"):
        sockcheck.check_socket_path(BackendTarget(match="*", url=f"unix://{path}"), path)


async def test_a_listener_of_the_wrong_account_is_refused(
        sock_dir: Path, token_file: Path, tmp_path: Path, other_user: pwd.struct_passwd) -> None:
    path, log = sock_dir / "a2a.sock", tmp_path / "received"
    async with raw_listener("unix", str(path), other_user.pw_uid, log):
        harness = make_harness(f"unix://{path}", token_file=token_file)
        recorder = await harness.serve(inbound("secret text"))
    assert recorder.kinds() == ["to_inbox"]  # left to the operator
    assert (f"the process listening on {path} runs as {other_user.pw_name}"
            in recorder.events[0][1])
    assert log.read_bytes() == b""  # the token was never written
    assert harness.evidence == []


@pytest.mark.parametrize("by", ["name", "uid"])
async def test_expected_user_names_the_listener(sock_dir: Path, token_file: Path, tmp_path: Path,
                                                other_user: pwd.struct_passwd, by: str) -> None:
    path, log = sock_dir / "a2a.sock", tmp_path / "received"
    expected = other_user.pw_name if by == "name" else other_user.pw_uid
    async with raw_listener("unix", str(path), other_user.pw_uid, log):
        harness = make_harness(f"unix://{path}", token_file=token_file, expected_user=expected)
        recorder = await harness.serve(inbound("hello"))
    # the checks passed, so the card request went out (and the mute listener failed it)
    assert b"GET /.well-known/agent-card.json" in log.read_bytes()
    assert recorder.kinds() == ["fail"]


async def test_path_only_skips_the_listener_check(sock_dir: Path, tmp_path: Path,
                                                  other_user: pwd.struct_passwd) -> None:
    path, log = sock_dir / "a2a.sock", tmp_path / "received"
    async with raw_listener("unix", str(path), other_user.pw_uid, log):
        await make_harness(f"unix://{path}", peer_check="path-only").serve(inbound("hello"))
    assert b"GET /.well-known/agent-card.json" in log.read_bytes()


async def test_a_loopback_tcp_backend_of_another_account_is_refused(
        token_file: Path, tmp_path: Path, other_user: pwd.struct_passwd) -> None:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    log = tmp_path / "received"
    async with raw_listener("tcp", str(port), other_user.pw_uid, log):
        harness = make_harness(f"http://127.0.0.1:{port}", token_file=token_file,
                               allow_tcp=True)
        recorder = await harness.serve(inbound("secret text"))
    assert recorder.kinds() == ["to_inbox"]  # left to the operator
    assert f"runs as {other_user.pw_name}" in recorder.events[0][1]
    assert log.read_bytes() == b""


async def test_a_missing_socket_is_unreachable_not_refused(sock_dir: Path) -> None:
    with pytest.raises(BackendError) as caught:
        sockcheck.check_socket_path(BackendTarget(match="*", url="unix:///x"), sock_dir / "nope")
    assert caught.value.stage is BackendStage.UNREACHABLE

