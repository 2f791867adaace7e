"""Loopback proxies that hold one HTTP request at a named moment, for the tests that race a
cancel or a kill with a step of a paid task. Everything else passes through byte for byte.

- :class:`RailProxy` (TCP) stands between a node and its hub: the node's WebSocket and its rail
  requests pass, except one ``/x402/<operation>`` request a :class:`Hold` is armed for;
- :class:`BackendProxy` (a unix socket) stands between the payee's backends module and its
  backend: it holds the next JSON-RPC call (the forward of a task).

The request is held either before the upstream saw it (``Moment.UNSEEN``) or after the upstream
answered it (``Moment.ANSWERED``: for a settle, the transfer is committed in the hub's ledger
and the payee has not heard it; for a forward, the backend did the work). The test acts then
(cancels, kills the hub) and releases the hold: the request is answered by nothing (the
connection closes, as when the upstream dies) or, held unseen, passed on. The node's clients are
not changed: they meet a connection closed under them, as they would in production.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

HEAD_END = b"\r\n\r\n"
REACH_TIMEOUT_S = 30.0
"""How long a test waits for a request to reach its hold, or to end once released."""


class Moment(StrEnum):
    UNSEEN = "unseen"
    """The request reached the proxy, not the upstream."""
    ANSWERED = "answered"
    """The upstream answered; the answer stays in the proxy."""


@dataclass
class Hold:
    path: str
    moment: Moment
    reached: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the held request is at ``moment``."""
    released: asyncio.Event = field(default_factory=asyncio.Event)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the held request was ended (unanswered, or passed on)."""
    pass_on: bool = False
    """On release: give the request (held unseen) to the upstream, instead of dropping it."""

    async def until_reached(self, timeout_s: float = REACH_TIMEOUT_S) -> None:
        """Wait until the held request is at :attr:`moment`."""
        await asyncio.wait_for(self.reached.wait(), timeout_s)

    async def until_closed(self, timeout_s: float = REACH_TIMEOUT_S) -> None:
        """Wait until the held request was ended, after :meth:`release`."""
        await asyncio.wait_for(self.closed.wait(), timeout_s)

    def release(self, *, pass_on: bool = False) -> None:
        self.pass_on = pass_on
        self.released.set()


def content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0


class HoldingProxy:
    """Listens (see the subclasses) and forwards each connection to the upstream."""

    def __init__(self) -> None:
        self._server: asyncio.Server | None = None
        self._holds: list[Hold] = []
        self._connections: set[asyncio.Task[None]] = set()

    def hold_path(self, path: str, moment: Moment) -> Hold:
        """Hold the next request for ``path`` at ``moment`` (once)."""
        hold = Hold(path, moment)
        self._holds.append(hold)
        return hold

    async def _listen(self) -> asyncio.Server:
        raise NotImplementedError

    async def _upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        raise NotImplementedError

    async def __aenter__(self) -> HoldingProxy:
        self._server = await self._listen()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        for hold in self._holds:
            hold.release()
        assert self._server is not None
        self._server.close()
        for connection in list(self._connections):
            connection.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await self._server.wait_closed()

    def _take(self, head: bytes) -> Hold | None:
        parts = head.split(b" ", 2)
        path = parts[1].decode("latin-1") if len(parts) > 1 else ""
        for hold in self._holds:
            if not hold.reached.is_set() and path == hold.path:
                self._holds.remove(hold)
                return hold
        return None

    async def _accepted(self, reader: asyncio.StreamReader,
                        writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._serve(reader, writer)
        except (OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            pass  # either side went away: so does the other
        except asyncio.CancelledError:
            pass  # closed by __aexit__; ending quietly keeps Python 3.11's stream callback from
            # logging the cancellation as an unhandled error
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(HEAD_END)
        hold = self._take(head)
        if hold is None:
            up_reader, up_writer = await self._upstream()
            try:
                up_writer.write(head)
                await self._pipe(reader, writer, up_reader, up_writer)
            finally:
                up_writer.close()
            return
        try:
            await self._serve_held(hold, head + await reader.readexactly(content_length(head)),
                                   writer)
        finally:
            hold.closed.set()  # however it ended: the client may have gone away meanwhile

    async def _serve_held(self, hold: Hold, request: bytes, writer: asyncio.StreamWriter) -> None:
        if hold.moment is Moment.UNSEEN:
            hold.reached.set()
            await hold.released.wait()
            if not hold.pass_on:
                return
        up_reader, up_writer = await self._upstream()
        try:
            up_writer.write(request)
            answer = await up_reader.readuntil(HEAD_END)
            answer += await up_reader.readexactly(content_length(answer))
        finally:
            up_writer.close()
        if hold.moment is Moment.ANSWERED:
            hold.reached.set()
            await hold.released.wait()
            return  # the upstream answered; the client hears nothing
        writer.write(answer)
        await writer.drain()

    @staticmethod
    async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter,
                    up_reader: asyncio.StreamReader, up_writer: asyncio.StreamWriter) -> None:
        async def copy(source: asyncio.StreamReader, target: asyncio.StreamWriter) -> None:
            while chunk := await source.read(65536):
                target.write(chunk)
                await target.drain()

        directions = [asyncio.create_task(copy(reader, up_writer)),
                      asyncio.create_task(copy(up_reader, writer))]
        try:
            await asyncio.wait(directions, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for direction in directions:
                direction.cancel()
            await asyncio.gather(*directions, return_exceptions=True)


class RailProxy(HoldingProxy):
    """Listens on 127.0.0.1 and forwards to the hub at ``127.0.0.1:upstream_port``; a node
    joined at :attr:`url` reaches the hub and its rail only through it."""

    def __init__(self, upstream_port: int) -> None:
        super().__init__()
        self.upstream_port = upstream_port
        self.port = 0

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def hold(self, operation: str, moment: Moment) -> Hold:
        """Hold the next ``/x402/<operation>`` request at ``moment`` (once)."""
        return self.hold_path(f"/x402/{operation}", moment)

    async def _listen(self) -> asyncio.Server:
        server = await asyncio.start_server(self._accepted, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        return server

    async def _upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_connection("127.0.0.1", self.upstream_port)


class BackendProxy(HoldingProxy):
    """Listens on the unix socket ``path`` and forwards to the backend's socket ``upstream``;
    a backend configured with :attr:`url` is reached only through it."""

    JSONRPC_PATH = "/a2a/jsonrpc"

    def __init__(self, path: Path, upstream: Path) -> None:
        super().__init__()
        self.path = path
        self.upstream = upstream

    @property
    def url(self) -> str:
        return f"unix://{self.path}"

    def hold(self, moment: Moment) -> Hold:
        """Hold the next JSON-RPC call (a task's forward, SendMessage) at ``moment`` (once)."""
        return self.hold_path(self.JSONRPC_PATH, moment)

    async def _listen(self) -> asyncio.Server:
        return await asyncio.start_unix_server(self._accepted, path=str(self.path))

    async def _upstream(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        return await asyncio.open_unix_connection(str(self.upstream))
