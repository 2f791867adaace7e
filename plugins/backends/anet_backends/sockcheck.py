"""Who may change a socket's path and who listens on it: the checks made before the token or
the text of a task is written to a backend.

Every function raises :class:`BackendError` (stage REFUSED) with a sentence that names the
offending path or account; nothing here writes to a socket.
"""

from __future__ import annotations

import functools
import grp
import ipaddress
import os
import pwd
import socket
import stat
import struct
from dataclasses import dataclass
from pathlib import Path, PurePath

from anet_core.api import (
    WILDCARDS,
    BackendError,
    BackendStage,
    BackendTarget,
    holders,
    listening_sockets,
    normal_address,
)

ROOT_UID = 0


def refused(reason: str) -> BackendError:
    return BackendError(BackendStage.REFUSED, reason)


def uid_of(user: str | int) -> int:
    """The uid of a user name or numeric uid (a digit string counts as a uid)."""
    if isinstance(user, int) or user.isdigit():
        return int(user)
    try:
        return pwd.getpwnam(user).pw_uid
    except KeyError:
        raise refused(f"expected_user {user!r} is not an account on this system") from None


def account_name(uid: int) -> str:
    try:
        return f"{pwd.getpwuid(uid).pw_name} (uid {uid})"
    except KeyError:
        return f"uid {uid}"


ACCOUNT_FILES = (Path("/etc/passwd"), Path("/etc/group"))
"""Where the account database lives; a change of either file is a change of group members."""


def _account_files() -> tuple[tuple[int, int, int, int], ...]:
    """What identifies the account files' present content: device, inode, size, mtime."""
    marks = []
    for path in ACCOUNT_FILES:
        try:
            info = os.stat(path)
        except OSError:
            marks.append((0, 0, 0, 0))
            continue
        marks.append((info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns))
    return tuple(marks)


_members: dict[int, tuple[tuple[tuple[int, int, int, int], ...], frozenset[int]]] = {}
"""Group members as last read, with the state of the account files they were read from."""


def group_members(gid: int) -> set[int]:
    """Every uid that may act with group ``gid``: listed members and primary-group users.

    Reading the whole account database (``getpwall``) is the slow part of a socket check: the
    answer is kept while ``/etc/passwd`` and ``/etc/group`` stay the same files with the same
    size and time (a changed account shows in either), and read again otherwise."""
    files = _account_files()
    known = _members.get(gid)
    if known is not None and known[0] == files:
        return set(known[1])
    members = _read_group_members(gid)
    _members[gid] = (files, frozenset(members))
    return members


def _read_group_members(gid: int) -> set[int]:
    members = {entry.pw_uid for entry in pwd.getpwall() if entry.pw_gid == gid}
    try:
        names = grp.getgrgid(gid).gr_mem
    except KeyError:
        return members
    for name in names:
        try:
            members.add(pwd.getpwnam(name).pw_uid)
        except KeyError:
            continue
    return members


@dataclass(frozen=True)
class SocketOwner:
    """The account a unix-socket backend must run as, and the socket file's owner."""

    backend_uid: int
    socket_uid: int


def check_socket_path(target: BackendTarget, path: Path) -> SocketOwner:
    """Refuse a socket whose path an untrusted account could change.

    Trusted: root, the daemon's user, the backend's user (``expected_user``, else the socket's
    owner), and for the socket's own directory the members of ``socket_group``. Intermediate
    directories may be world-writable with the sticky bit (``/tmp``): others cannot rename or
    remove what a trusted account made there. Symbolic links are checked on both paths.
    """
    try:
        info = os.lstat(path)
    except OSError as error:
        raise BackendError(BackendStage.UNREACHABLE,
                           f"socket {path} is not there: {error.strerror}") from None
    if not stat.S_ISSOCK(info.st_mode):
        raise refused(f"{path} is not a socket")
    backend_uid = (uid_of(target.expected_user) if target.expected_user is not None
                   else info.st_uid)
    trusted = {ROOT_UID, os.geteuid(), backend_uid}
    if info.st_uid not in trusted:
        raise refused(f"socket {path} belongs to {account_name(info.st_uid)}, "
                      "who is neither root, the daemon's user nor the backend's user")
    group_trusted: set[int] = set()
    if target.socket_group is not None:
        try:
            group_trusted = group_members(grp.getgrnam(target.socket_group).gr_gid)
        except KeyError:
            raise refused(f"socket_group {target.socket_group!r} is not a group on this "
                          "system") from None
    given, real = _directories(str(path)), _directories(os.path.realpath(path))
    own = {given[0], real[0]}
    for directory in dict.fromkeys(given + real):
        own_dir = directory in own
        _check_directory(directory, trusted | (group_trusted if own_dir else set()),
                         sticky_ok=not own_dir)
    return SocketOwner(backend_uid=backend_uid, socket_uid=info.st_uid)


@functools.lru_cache(maxsize=256)
def _directories(path: str) -> tuple[str, ...]:
    """The directories above ``path``, its own first (text only: what they are is stat'ed
    anew by every check)."""
    return tuple(str(parent) for parent in PurePath(path).parents)


def _check_directory(directory: str, trusted: set[int], *, sticky_ok: bool) -> None:
    try:
        info = os.stat(directory)
    except OSError as error:
        raise refused(f"directory {directory} cannot be checked: {error.strerror}") from None
    writers = {info.st_uid}
    if info.st_mode & stat.S_IWGRP:
        writers |= group_members(info.st_gid)
    untrusted = writers - trusted
    if untrusted:
        who = ", ".join(account_name(uid) for uid in sorted(untrusted))
        raise refused(f"directory {directory} can be changed by {who}, who is not trusted for "
                      "this backend")
    if info.st_mode & stat.S_IWOTH and not (sticky_ok and info.st_mode & stat.S_ISVTX):
        raise refused(f"directory {directory} can be changed by every user "
                      f"(mode {stat.filemode(info.st_mode)})")


def unix_peer_uid(sock: socket.socket) -> int:
    """The uid of the process at the other end of a connected unix socket (SO_PEERCRED)."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        raise refused("this platform cannot tell who listens on a unix socket; set "
                      "peer_check: path-only to rely on the path check alone")
    _pid, uid, _gid = struct.unpack("3i", sock.getsockopt(socket.SOL_SOCKET, option,
                                                          struct.calcsize("3i")))
    return uid


def check_unix_peer(sock: socket.socket, owner: SocketOwner, path: Path) -> None:
    """Refuse a connection whose listener is not the backend's account."""
    uid = unix_peer_uid(sock)
    if uid != owner.backend_uid:
        raise refused(f"the process listening on {path} runs as {account_name(uid)}, "
                      f"not as {account_name(owner.backend_uid)}")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def tcp_listener_uids(remote: tuple[str, int]) -> set[int]:
    """The accounts of the processes holding the socket that listens on ``remote`` (on the
    address itself or on the wildcard address). Processes of other accounts cannot be inspected
    unless the daemon runs as root, so an empty set means "not the daemon's user" as well.
    """
    address, port = normal_address(*remote)
    sockets = [listening for listening in listening_sockets(port)
               if listening.address == address or listening.address in WILDCARDS]
    return set(holders(sockets).values())


def check_tcp_peer(remote: tuple[str, int]) -> None:
    """Refuse a loopback TCP backend not run by the daemon's user."""
    uids = tcp_listener_uids(remote)
    if uids != {os.geteuid()}:
        who = ", ".join(account_name(uid) for uid in sorted(uids)) or "an account this " \
            "daemon cannot inspect"
        raise refused(f"the process listening on {remote[0]}:{remote[1]} runs as {who}, "
                      f"not as the daemon's user {account_name(os.geteuid())}")
