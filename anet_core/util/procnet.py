"""Listening TCP sockets and the processes holding them, as Linux's /proc shows them.

The local A2A endpoint asks who holds its recorded port; the backends module asks who listens
on a loopback backend. Elsewhere than Linux nothing is found, which both treat as "unknown".
"""

from __future__ import annotations

import ipaddress
import os
import socket
import struct
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
TCP_TABLES = ("net/tcp", "net/tcp6")
TCP_LISTEN = "0A"
WILDCARDS = frozenset({"0.0.0.0", "::"})


@dataclass(frozen=True)
class ListeningSocket:
    address: str
    """The local address, normalised (an IPv4-mapped IPv6 address reads as IPv4)."""
    port: int
    uid: int
    """The socket's owner: the account that opened it (not necessarily the one holding it)."""
    inode: str


def listening_sockets(port: int, proc: Path = PROC) -> list[ListeningSocket]:
    """Every TCP socket listening on ``port``, on any local address, IPv4 or IPv6."""
    found = []
    for table in TCP_TABLES:
        try:
            lines = (proc / table).read_text(encoding="ascii").splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 10 or fields[3] != TCP_LISTEN:
                continue
            address, local_port = proc_address(fields[1])
            if local_port == port:
                found.append(ListeningSocket(address, local_port, int(fields[7]), fields[9]))
    return found


def holders(sockets: Iterable[ListeningSocket], proc: Path = PROC) -> dict[int, int]:
    """The processes (pid → uid) holding a file descriptor on one of ``sockets``.

    Only processes whose descriptors this process may read are seen: all of them as root, this
    user's otherwise.
    """
    targets = {f"socket:[{listening.inode}]" for listening in sockets}
    found: dict[int, int] = {}
    if not targets:
        return found
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if any(os.readlink(fd) in targets for fd in (entry / "fd").iterdir()):
                found[int(entry.name)] = entry.stat().st_uid
        except OSError:
            continue
    return found


def command_of(pid: int, proc: Path = PROC) -> str | None:
    try:
        return (proc / str(pid) / "comm").read_text().strip() or None
    except OSError:
        return None


def normal_address(host: str, port: int) -> tuple[str, int]:
    ip = ipaddress.ip_address(host.split("%")[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return str(ip), int(port)


def proc_address(text: str) -> tuple[str, int]:
    """``0100007F:1F90`` → ("127.0.0.1", 8080); the address words are in host byte order."""
    hex_ip, _, hex_port = text.partition(":")
    raw = b"".join(struct.pack("=I", int(hex_ip[i:i + 8], 16))
                   for i in range(0, len(hex_ip), 8))
    family = socket.AF_INET if len(raw) == 4 else socket.AF_INET6
    return normal_address(socket.inet_ntop(family, raw), int(hex_port, 16))
