"""aiohttp connectors that check a backend on the very connection that then carries a request.

A unix socket is checked twice: its path before connecting, its listener (SO_PEERCRED) on the
connected socket, which only then is handed to aiohttp. A loopback TCP connection is checked
through /proc/net/tcp and /proc/*/fd before aiohttp writes to it, and never reused
(``force_close``).

A unix-socket connection may be kept for the next request (``keep_alive``, the forwards of a
running node) for :data:`KEEP_ALIVE_S`, less than servers keep an idle connection (uvicorn,
hypercorn and Node.js: 5 s), so that a kept connection is not one the server is closing. Before
a request goes over a kept connection its socket's path is checked again, and the socket must
still be the file the connection was made to: a changed socket, owner, mode or directory is
noticed before the next write, as on a new connection. Its listener cannot have changed.
"""

from __future__ import annotations

import asyncio
import os
import socket
import weakref
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp
from aiohttp.client_proto import ResponseHandler

from anet_backends import sockcheck
from anet_core.api import BackendError, BackendStage, BackendTarget

if TYPE_CHECKING:
    from aiohttp.client_reqrep import ClientRequest, Connection
    from aiohttp.tracing import Trace

CONNECT_TIMEOUT_S = 10.0
KEEP_ALIVE_S = 1.0
"""How long a unix-socket connection stays open for the next request (see above)."""


class CheckedUnixConnector(aiohttp.BaseConnector):
    """Connects to ``target``'s unix socket and refuses it unless every check passes."""

    def __init__(self, target: BackendTarget, path: Path, *, keep_alive: bool = False) -> None:
        if keep_alive:
            # No limit: a forward holds its connection for its whole turn, and a backend may
            # have any number of turns open (as when each forward had a session of its own).
            super().__init__(keepalive_timeout=KEEP_ALIVE_S, limit=0)
        else:
            super().__init__(force_close=True)
        self._target = target
        self._path = path
        self._made_to: weakref.WeakKeyDictionary[ResponseHandler, tuple[int, int]] = \
            weakref.WeakKeyDictionary()
        """The socket file (device, inode) each connection was made to."""
        self._fresh: weakref.WeakSet[ResponseHandler] = weakref.WeakSet()
        """Connections made and checked for a request that has not had them yet."""

    async def connect(self, req: ClientRequest, traces: list[Trace],
                      timeout: aiohttp.ClientTimeout) -> Connection:
        while True:
            connection = await super().connect(req, traces, timeout)
            protocol = connection.protocol
            if protocol in self._fresh:
                self._fresh.discard(protocol)
                return connection  # made for this request: _create_connection checked it
            try:
                sockcheck.check_socket_path(self._target, self._path)  # a kept one, again
            except BackendError:
                connection.close()
                raise
            if protocol is not None and self._made_to.get(protocol) == socket_file(self._path):
                return connection
            connection.close()  # kept, but the socket has been replaced since: not this one

    async def _create_connection(self, req: ClientRequest, traces: list[Trace],
                                 timeout: aiohttp.ClientTimeout) -> ResponseHandler:
        owner = sockcheck.check_socket_path(self._target, self._path)
        made_to = socket_file(self._path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.setblocking(False)
        try:
            try:
                async with asyncio.timeout(timeout.sock_connect or CONNECT_TIMEOUT_S):
                    await self._loop.sock_connect(sock, str(self._path))
            except (OSError, TimeoutError) as error:
                raise BackendError(BackendStage.UNREACHABLE,
                                   f"cannot connect to {self._path}: "
                                   f"{getattr(error, 'strerror', None) or 'timed out'}") from None
            if self._target.peer_check != "path-only":
                sockcheck.check_unix_peer(sock, owner, self._path)
            _, protocol = await self._loop.create_connection(self._factory, sock=sock)
        except BaseException:
            sock.close()
            raise
        if made_to is not None:
            self._made_to[protocol] = made_to
        self._fresh.add(protocol)
        return protocol


def socket_file(path: Path) -> tuple[int, int] | None:
    """What identifies the socket file at ``path`` (device, inode); None when there is none."""
    try:
        info = os.stat(path)
    except OSError:
        return None
    return info.st_dev, info.st_ino


class CheckedTCPConnector(aiohttp.TCPConnector):
    """A TCP connector that refuses a loopback listener not run by the daemon's user."""

    def __init__(self) -> None:
        super().__init__(force_close=True)

    async def _create_connection(self, req: ClientRequest, traces: list[Trace],
                                 timeout: aiohttp.ClientTimeout) -> ResponseHandler:
        try:
            protocol = await super()._create_connection(req, traces, timeout)
        except (aiohttp.ClientConnectorError, OSError, TimeoutError) as error:
            raise BackendError(BackendStage.UNREACHABLE,
                               f"cannot connect to {req.url.host}:{req.url.port}: "
                               f"{error}") from None
        transport = protocol.transport
        if transport is not None and sockcheck.is_loopback(req.url.host or ""):
            try:
                sockcheck.check_tcp_peer(transport.get_extra_info("peername")[:2])
            except BackendError:
                transport.abort()
                raise
        return protocol
