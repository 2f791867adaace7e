"""Loopback HTTP listeners: binding, the Host/Origin/bearer checks, and token files.

The control plane and the local A2A endpoint both use these checks, each with its own token:
a token is accepted on its own listener only.
"""

from __future__ import annotations

import hmac
import os
import secrets
import socket
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from aiohttp import web

from anet_core.util.fsutil import write_private

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


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


@dataclass(frozen=True)
class LoopbackGuard:
    """The checks every request passes, in this order: Host (421), Origin (403), token (401)."""

    port: int
    token: Callable[[], str]
    realm: str

    def refusal(self, request: web.Request) -> web.Response | None:
        if not host_names_listener(request.headers.get("Host"), self.port):
            return web.Response(status=421, text="Misdirected Request: use a loopback address "
                                f"(127.0.0.1, localhost or [::1]) with port {self.port}\n")
        if "Origin" in request.headers:
            return web.Response(status=403, text="Forbidden: requests from web pages are refused\n")
        if not bearer_matches(request.headers.get("Authorization"), self.token()):
            return web.Response(status=401, text="Unauthorized: a valid bearer token is required\n",
                                headers={"WWW-Authenticate": f'Bearer realm="{self.realm}"'})
        return None

    def middleware(self) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
        @web.middleware
        async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
            return self.refusal(request) or await handler(request)

        return guard
