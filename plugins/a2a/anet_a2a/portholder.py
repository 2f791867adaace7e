"""Who holds a loopback TCP port: read from /proc on Linux, unknown elsewhere.

When the recorded port is taken, the token is replaced if the holder may be another local user
(it could be collecting the tokens clients send). An unknown holder may be anyone.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from anet_core.api import PROC, command_of, holders, listening_sockets


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


def find_holder(port: int, proc: Path = PROC) -> PortHolder:
    """The listener on ``port`` (any local address, IPv4 or IPv6), as far as /proc shows it."""
    sockets = listening_sockets(port, proc)
    if not sockets:
        return PortHolder()
    pid = min(holders(sockets[:1], proc), default=None)
    return PortHolder(uid=sockets[0].uid, pid=pid,
                      command=command_of(pid, proc) if pid is not None else None)
