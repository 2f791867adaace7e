"""Loopback listeners without a web framework: binding a port on 127.0.0.1, the Host names that
reach it, and bearer tokens (made, compared in constant time, kept in a 0600 file).

The control plane and the local A2A endpoint both use these, each with its own token: a token
is accepted on its own listener only. The checks of a request are applied by
:class:`anet_core.control.guard.LoopbackGuard`; commands that only read or replace a token
(``anet publish token``, ``anet a2a rotate-token``) load no HTTP server.
"""

from __future__ import annotations

import hmac
import os
import secrets
import socket
from pathlib import Path

from anet_core.util.fsutil import write_private

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def new_token() -> str:
    """A bearer token: 256 random bits, URL-safe."""
    return secrets.token_urlsafe(32)


def bind_loopback(port: int) -> socket.socket:
    """A listening TCP socket on 127.0.0.1 (``port`` 0: any free one); OSError when taken.

    SO_REUSEADDR: a connection this port's listener closed lingers in TIME_WAIT for about a
    minute and holds no port; without it a restart within that minute (``anet stop && anet
    up``, a SIGKILL with a request in flight, systemd's restart after 5 s) could not bind the
    port again. A listener of another process still makes the bind fail (Linux, BSD, macOS).
    """
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", port))
        sock.listen(128)
    except OSError:
        sock.close()
        raise
    sock.setblocking(False)
    return sock


def host_names_listener(host: str | None, port: int) -> bool:
    """True when the Host header names a loopback name with exactly this listener's port.

    Names a resolver merely maps to loopback are refused: that is what DNS rebinding uses.
    """
    if not host:
        return False
    return host.lower() in {f"{name}:{port}" for name in LOOPBACK_NAMES}


def bearer_matches(authorization: str | None, token: str) -> bool:
    """Compare the bearer token in constant time. Surrounding white space is not forgiven.

    Header bytes that are not UTF-8 (``\xff``) reach here as surrogate escapes: they are
    compared as the bytes they were, so they never match and never raise.
    """
    if not authorization or not token:
        return False
    scheme, _, value = authorization.partition(" ")
    if scheme.lower() != "bearer":
        return False
    return hmac.compare_digest(value.encode("utf-8", "surrogateescape"), token.encode())


class TokenFile:
    """A bearer token kept in a 0600 file, read again whenever the file is replaced."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._stamp: tuple[int, int] | None = None
        self._token = ""

    def current(self) -> str:
        try:
            stat = os.stat(self.path)
        except FileNotFoundError:
            return ""
        stamp = (stat.st_ino, stat.st_mtime_ns)
        if stamp != self._stamp:
            self._token = self.path.read_text(encoding="ascii").strip()
            self._stamp = stamp
        return self._token

    def replace(self) -> str:
        """Write a new token; requests with the old one are refused from now on."""
        write_private(self.path, new_token() + "\n")
        return self.current()

    def ensure(self) -> str:
        """The token, created if the file does not exist yet."""
        return self.current() or self.replace()
