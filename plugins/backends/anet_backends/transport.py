"""aiohttp connectors that check a backend on the very connection that then carries a request.

A unix socket is checked twice: its path before connecting, its listener (SO_PEERCRED) on the
connected socket, which only then is handed to aiohttp. A loopback TCP connection is checked
through /proc/net/tcp and /proc/*/fd before aiohttp writes to it. Connections are never reused
(``force_close``): each request goes over a connection checked for it.
"""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path
from typing import TYPE_CHECKING

import aiohttp
from aiohttp.client_proto import ResponseHandler

from anet_backends import sockcheck
from anet_core.api import BackendError, BackendStage, BackendTarget

if TYPE_CHECKING:
    from aiohttp.client_reqrep import ClientRequest
    from aiohttp.tracing import Trace

CONNECT_TIMEOUT_S = 10.0


class CheckedUnixConnector(aiohttp.BaseConnector):
    """Connects to ``target``'s unix socket and refuses it unless every check passes."""

    def __init__(self, target: BackendTarget, path: Path) -> None:
        super().__init__(force_close=True)
        self._target = target
        self._path = path

    async def _create_connection(self, req: ClientRequest, traces: list[Trace],
                                 timeout: aiohttp.ClientTimeout) -> ResponseHandler:
        owner = sockcheck.check_socket_path(self._target, self._path)
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
        return protocol


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
