"""Who holds a loopback TCP port: read from /proc on Linux, unknown elsewhere.

When the recorded port is taken, the token is replaced if the holder may be another local user
(it could be collecting the tokens clients send). An unknown holder may be anyone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

_LISTEN = "0A"
_PROC = Path("/proc")


@dataclass(frozen=True)
class PortHolder:
    """The listening socket on a port: its owner's uid and, when visible to us, the process."""

    uid: int | None = None
    pid: int | None = None
    command: str | None = None

    @property
    def may_be_another_user(self) -> bool:
        return self.uid != os.getuid()

    def describe(self) -> str:
        if self.uid is None:
            return "a process of an unknown user"
        who = "this user" if self.uid == os.getuid() else f"uid {self.uid}"
        if self.pid is not None:
            return f"{self.command or 'a process'} (pid {self.pid}, {who})"
        return f"a process of {who}"


def find_holder(port: int, proc: Path = _PROC) -> PortHolder:
    """The listener on ``port`` (any local address, IPv4 or IPv6), as far as /proc shows it."""
    for table in ("net/tcp", "net/tcp6"):
        try:
            lines = (proc / table).read_text(encoding="ascii").splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != _LISTEN:
                continue
            if int(fields[1].rpartition(":")[2], 16) != port:
                continue
            uid, inode = int(fields[7]), fields[9]
            pid = _pid_of_socket(inode, proc)
            return PortHolder(uid=uid, pid=pid, command=_command(pid, proc) if pid else None)
    return PortHolder()


def _pid_of_socket(inode: str, proc: Path) -> int | None:
    # Only processes whose fds we may read are found (our own user's): enough to name them.
    target = f"socket:[{inode}]"
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) == target for fd in (entry / "fd").iterdir()):
                return int(entry.name)
        except OSError:
            continue
    return None


def _command(pid: int, proc: Path) -> str | None:
    try:
        return (proc / str(pid) / "comm").read_text().strip() or None
    except OSError:
        return None
