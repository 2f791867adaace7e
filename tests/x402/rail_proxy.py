"""A loopback TCP proxy between a payee node and its hub, for the tests that kill the hub at a
named moment of a payment: everything passes through byte for byte (the node's WebSocket, its
rail requests), except one ``/x402/<operation>`` request a :class:`Hold` is armed for.

That request is held either before it reaches the hub (``Moment.BEFORE_HUB``) or after the hub
answered it (``Moment.AFTER_HUB``: for a settle, the transfer is committed in the hub's ledger
and the payee has not heard it). The test kills the hub then, and releases the hold: the
request is answered by nothing (the connection closes, as when the hub dies) or, held before the
hub, passed on to the hub that runs again. The node's rail client is not changed: it meets a
connection closed under it, as it would in production.
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass, field
from enum import StrEnum

HEAD_END = b"\r\n\r\n"


class Moment(StrEnum):
    BEFORE_HUB = "before-hub"
    """The request reached the proxy, not the hub."""
    AFTER_HUB = "after-hub"
    """The hub answered; the answer stays in the proxy."""


@dataclass
class Hold:
    operation: str
    moment: Moment
    reached: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the held request is at ``moment``."""
    released: asyncio.Event = field(default_factory=asyncio.Event)
    closed: asyncio.Event = field(default_factory=asyncio.Event)
    """Set once the held request was ended (unanswered, or passed on)."""
    pass_on: bool = False
    """On release: give the request (held before the hub) to the hub, instead of dropping it."""

    def release(self, *, pass_on: bool = False) -> None:
        self.pass_on = pass_on
        self.released.set()


def content_length(head: bytes) -> int:
    for line in head.split(b"\r\n")[1:]:
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            return int(value.strip())
    return 0


class RailProxy:
    """Listens on 127.0.0.1 and forwards to the hub at ``127.0.0.1:upstream_port``; a node
    joined at :attr:`url` reaches the hub and its rail only through it."""

    def __init__(self, upstream_port: int) -> None:
        self.upstream_port = upstream_port
        self.port = 0
        self._server: asyncio.Server | None = None
        self._holds: list[Hold] = []
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def hold(self, operation: str, moment: Moment) -> Hold:
        """Hold the next ``/x402/<operation>`` request at ``moment`` (once)."""
        hold = Hold(operation, moment)
        self._holds.append(hold)
        return hold

    async def __aenter__(self) -> RailProxy:
        self._server = await asyncio.start_server(self._accepted, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]
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
            if not hold.reached.is_set() and path == f"/x402/{hold.operation}":
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
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(OSError):
                await writer.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(HEAD_END)
        hold = self._take(head)
        body = await reader.readexactly(content_length(head)) if hold else b""
        if hold is not None and hold.moment is Moment.BEFORE_HUB:
            hold.reached.set()
            await hold.released.wait()
            if not hold.pass_on:
                hold.closed.set()
                return
        up_reader, up_writer = await asyncio.open_connection("127.0.0.1", self.upstream_port)
        try:
            up_writer.write(head + body)
            if hold is None:
                await self._pipe(reader, writer, up_reader, up_writer)
                return
            answer = await up_reader.readuntil(HEAD_END)
            answer += await up_reader.readexactly(content_length(answer))
            if hold.moment is Moment.AFTER_HUB:
                hold.reached.set()
                await hold.released.wait()
                hold.closed.set()
                return  # the hub answered; the payee hears nothing
            writer.write(answer)
            await writer.drain()
            hold.closed.set()
        finally:
            up_writer.close()

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
