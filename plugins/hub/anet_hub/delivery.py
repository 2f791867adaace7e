"""One registered node's connection at the hub: the frames the hub sends it on its own.

Two kinds go out on a :class:`Connection` besides direct answers: envelopes for the node
(``deliver``), and the ``accepted`` of envelopes the node sent, which arrive when their
recipients acknowledge them (see :class:`LiveEnvelope`). Either is written at once, by the
session that has it, when nothing waits before it and the node's socket has taken all that was
written so far (the frames written so in one turn of the event loop go out in one ``send()``);
otherwise it waits for the connection's own task, which sends answers first. So a slow reader
holds up only what is sent to it, never its senders or its recipients.

An envelope for a node is either stored (a :class:`QueuedEnvelope`, deleted when acknowledged)
or *live*: forwarded before it was stored, its sender told ``accepted`` only when the recipient
acknowledged it. A live envelope is stored after all, and its sender told then, when the
recipient does not acknowledge it within ``STORE_AFTER_S``, when more than ``LIVE_LIMIT``
envelopes or ``LIVE_BYTES_LIMIT`` bytes wait live, or when the connection ends first
(docs/performance.md, "The hub's relay", says why this loses nothing).
"""

from __future__ import annotations

import asyncio
import json
import logging
import struct
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass

from aiohttp import web

from anet_hub.storage import HubStorage, QueuedEnvelope, StorageError

log = logging.getLogger(__name__)

DELIVERY_WINDOW = 256
"""Envelopes sent to a node and not yet acknowledged; beyond it the hub waits for acks."""
OUTBOX_LIMIT = 1024
"""Stored envelopes held in memory for a connected node; past it the node is fed from storage."""
LIVE_LIMIT = 1024
LIVE_BYTES_LIMIT = 8 * 1024 * 1024
"""Envelopes (and their bytes) a node may have unacknowledged and unstored; past either, the
hub stores them."""
STORE_AFTER_S = 1.0
"""A live envelope not acknowledged by then is stored and its sender told ``accepted``: far
below the 30 s a node waits for an answer, far above a recipient's usual few milliseconds."""
SCAN_BATCH = 128
SCAN_RETRY_S = 1.0
"""A queue read that failed (storage unreachable) is tried again this long after."""


@dataclass(slots=True, eq=False)
class LiveEnvelope:
    """An envelope forwarded to its recipient before it was stored."""

    id: str
    sender: str
    recipient: str
    text: str
    """The envelope's JSON exactly as it is forwarded."""
    received_at: float
    rid: str
    """The sender's request id, repeated in its ``accepted``."""
    reply_to: Connection
    """The sender's connection, told ``accepted`` (or why not) on it."""
    storing: asyncio.Future[None] | None = None
    """Set while the hub stores it; done once stored (or the store failed)."""

    @property
    def stored_at(self) -> float:
        """What ``deliver`` says as ``queuedAt``: when the hub took it."""
        return self.received_at


_FIN_TEXT = 0x81
_HEADER_SHORT = struct.Struct("!BB")
_HEADER_MEDIUM = struct.Struct("!BBH")
_HEADER_LONG = struct.Struct("!BBQ")


def _deliver_frame(item: QueuedEnvelope | LiveEnvelope) -> str:
    # The envelope's text is forwarded as is: no parse and re-encode of large envelopes.
    return f'{{"type":"deliver","queuedAt":{item.stored_at!r},"envelope":{item.text}}}'


def accepted_frame(rid: str, envelope_id: str) -> str:
    """``AcceptedFrame(rid=rid, id=envelope_id).dump()``, without a model per envelope."""
    return f'{{"type":"accepted","rid":{json.dumps(rid)},"id":{json.dumps(envelope_id)}}}'


class Connection:
    """A registered node's WebSocket, seen from the relay: what was sent, what waits.

    ``spill`` is called (by the relay) when the node's live envelopes must be stored now. An
    idle connection holds no task and no queue: 1,000s of them are mostly the socket's own.
    """

    __slots__ = ("_answers", "_inflight", "_live", "_live_bytes", "_outbox", "_rescan",
                 "_room", "_scanning", "_spill", "_started", "_storage", "_task", "_timer",
                 "_transport", "_unflushed", "aid", "closed", "since", "spilling", "storing",
                 "ws")

    def __init__(self, aid: str, ws: web.WebSocketResponse, transport: asyncio.Transport | None,
                 storage: HubStorage, *, spill: Callable[[Connection], None]) -> None:
        self.aid = aid
        self.ws = ws
        self.since = time.time()
        self.closed = False
        self.storing = False
        """True while new envelopes for this node are stored first (it fell behind or was
        slow); it goes back to live once everything sent to it was acknowledged."""
        self.spilling: asyncio.Future[None] | None = None
        """Done when the live envelopes being stored now are stored."""
        self._transport = transport
        self._storage = storage
        self._spill = spill
        self._started = False
        self._inflight: dict[str, float] = {}
        """Envelope id → when the hub received it (the relay latency is measured at the ack)."""
        self._outbox: deque[QueuedEnvelope | LiveEnvelope] | None = None
        self._live: dict[str, LiveEnvelope] = {}
        self._live_bytes = 0
        self._answers: list[str] | None = None
        self._rescan = True  # a new connection first drains what was queued while it was away
        self._scanning = False
        self._timer: asyncio.TimerHandle | None = None
        self._task: asyncio.Task[None] | None = None
        self._unflushed: list[bytes] | None = None
        """Frames written at once in this turn of the event loop (:meth:`_write_soon`)."""
        self._room: asyncio.Future[None] | None = None
        """Waited on while ``DELIVERY_WINDOW`` envelopes wait for their acknowledgement."""

    def start(self) -> None:
        """The node was told it is registered: frames for it may go out from now on."""
        self._started = True
        self._kick()

    # -- what the relay hands it --------------------------------------------------------------

    async def answer(self, frame: str) -> None:
        """Send ``frame`` (an answer to this node's request): now, or from the delivery task."""
        if self.closed:
            return
        if not self._answers and self._writable():
            self._write_soon(frame)
            return
        if self._answers is None:
            self._answers = []
        self._answers.append(frame)
        self._kick()

    def push(self, item: QueuedEnvelope) -> None:
        """A stored envelope for this node."""
        outbox = self._queue()
        if len(outbox) >= OUTBOX_LIMIT:
            # The node is slower than its senders: drop the memory copies of stored envelopes,
            # storage has them all (live ones it has not: those stay).
            self._outbox = deque(entry for entry in outbox if isinstance(entry, LiveEnvelope))
            self._rescan = True
        else:
            outbox.append(item)
        self._kick()

    async def forward(self, item: LiveEnvelope) -> bool:
        """Take a live envelope; False when it must be stored instead (this node is being fed
        from storage, or too much waits live: then what waits is stored too)."""
        if self.storing or self.closed:
            return False
        again = self._live.get(item.id)
        if again is not None:
            # Sent again (the sender's connection broke): the answer goes to the new request.
            if again.storing is not None:
                return False
            again.reply_to, again.rid = item.reply_to, item.rid
            return True
        if len(self._live) >= LIVE_LIMIT or self._live_bytes + len(item.text) > LIVE_BYTES_LIMIT:
            self._spill(self)
            return False
        self._live[item.id] = item
        self._live_bytes += len(item.text)
        if self._timer is None:
            self._timer = asyncio.get_running_loop().call_later(STORE_AFTER_S, self._check_age)
        if self._outbox or self._rescan or self._scanning \
                or len(self._inflight) >= DELIVERY_WINDOW or not self._writable():
            self._queue().append(item)
            self._kick()
            return True
        if item.id not in self._inflight:
            self._inflight[item.id] = item.stored_at
            self._write_soon(_deliver_frame(item))
        return True

    def take_live(self) -> list[LiveEnvelope]:
        """The live envelopes not being stored yet, in the order they came, to be stored now;
        from now on new envelopes for this node are stored first."""
        self.storing = True
        return [item for item in self._live.values() if item.storing is None]

    def stored(self, items: list[LiveEnvelope]) -> None:
        """``items`` (from :meth:`take_live`) are in storage now, or failed to be."""
        for item in items:
            if self._live.pop(item.id, None) is not None:
                self._live_bytes -= len(item.text)
        self._maybe_live()

    def rescan(self) -> None:
        """Read the node's queue from storage again (an envelope may be there that no one
        pushed: a notification between instances was lost)."""
        self._rescan = True
        self._kick()

    def acked(self, envelope_id: str) -> tuple[float | None, LiveEnvelope | None]:
        """When the acknowledged envelope came to the hub, if it was sent on this connection;
        and the live envelope it is, if it is one."""
        received_at = self._inflight.pop(envelope_id, None)
        live = self._live.get(envelope_id)
        if live is not None and live.storing is None:
            del self._live[envelope_id]
            self._live_bytes -= len(live.text)
        room = self._room
        if received_at is not None and room is not None and not room.done():
            room.set_result(None)
        elif self._outbox:
            self._kick()
        self._maybe_live()
        return received_at, live

    def close(self) -> None:
        """The connection ended: nothing more is sent on it (the relay stores what it had
        live, :meth:`take_live`)."""
        self.closed = True
        self._answers = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        if self._task is not None:
            self._task.cancel()

    def _queue(self) -> deque[QueuedEnvelope | LiveEnvelope]:
        if self._outbox is None:
            self._outbox = deque()
        return self._outbox

    def _writable(self) -> bool:
        """The node was told it is registered and its socket took everything written so far: a
        frame written now does not wait for it to read."""
        transport = self._transport
        return self._started and transport is not None \
            and transport.get_write_buffer_size() == 0

    def _check_age(self) -> None:
        self._timer = None
        pending = [item for item in self._live.values() if item.storing is None]
        if not pending:
            return
        due = pending[0].received_at + STORE_AFTER_S - time.time()
        if due <= 0:
            log.info("event=recipient-slow aid=%s live=%d then=store", self.aid, len(pending))
            self._spill(self)
        else:
            self._timer = asyncio.get_running_loop().call_later(due, self._check_age)

    def _maybe_live(self) -> None:
        if self.storing and not (self._inflight or self._outbox or self._live or self._rescan
                                 or self._scanning or self.closed):
            self.storing = False

    # -- the task that sends what waits -------------------------------------------------------

    def _kick(self) -> None:
        """Run the delivery task, unless it runs (or the node may not be written to yet)."""
        if self._task is None and self._started and not self.closed:
            self._task = asyncio.create_task(self._deliver(), name=f"deliver-{self.aid[:8]}")
            self._task.add_done_callback(self._delivered)

    def _delivered(self, task: asyncio.Task[None]) -> None:
        self._task = None
        if task.cancelled():
            return
        error = task.exception()
        if error is not None and not isinstance(error, ConnectionError):
            log.error("event=delivery-failed aid=%s error=%r", self.aid, error)
            asyncio.ensure_future(self.ws.close(code=1011, message=b"hub session failed"))
        elif error is None and not self.closed and (
                self._answers or self._rescan
                or (self._outbox and len(self._inflight) < DELIVERY_WINDOW)):
            self._kick()  # more came as it ended

    async def _deliver(self) -> None:
        """Send what waits, answers first; end when nothing does (or the window is full: the
        next acknowledgement runs it again)."""
        while not self.closed:
            if self._answers:
                await self._send_answers()
            elif self._rescan:
                self._rescan = False
                self._scanning = True
                try:
                    await self._scan()
                except StorageError as error:
                    log.error("event=queue-read-failed aid=%s reason=%s", self.aid, error.reason)
                    self._rescan = True
                    await asyncio.sleep(SCAN_RETRY_S)
                finally:
                    self._scanning = False
                self._maybe_live()
            elif self._outbox and len(self._inflight) < DELIVERY_WINDOW:
                await self._send(self._outbox.popleft())
            else:
                if self._outbox is not None and not self._outbox:
                    self._outbox = None
                return

    async def _send_answers(self) -> None:
        self._flush()
        answers, self._answers = self._answers, None
        for frame in answers or ():
            await self.ws.send_str(frame)

    async def _scan(self) -> None:
        after = 0
        while True:
            batch = await self._storage.pending(self.aid, after_seq=after, limit=SCAN_BATCH,
                                                now=time.time())
            for item in batch:
                after = item.seq
                while len(self._inflight) >= DELIVERY_WINDOW:
                    if self._answers:
                        await self._send_answers()
                        continue
                    self._room = asyncio.get_running_loop().create_future()
                    try:
                        await self._room
                    finally:
                        self._room = None
                await self._send(item)
            if len(batch) < SCAN_BATCH:
                return

    async def _send(self, item: QueuedEnvelope | LiveEnvelope) -> None:
        # Skipping what is in flight makes a scan and the outbox safe to overlap; an envelope
        # acknowledged in between may go out twice, which the recipient's dedupe absorbs.
        if item.id in self._inflight:
            return
        if isinstance(item, QueuedEnvelope) and item.expires_at <= time.time():
            return
        self._inflight[item.id] = item.stored_at
        self._flush()  # what was written at once goes first
        await self.ws.send_str(_deliver_frame(item))

    # -- frames written at once ---------------------------------------------------------------

    def _write_soon(self, text: str) -> None:
        """Write the text frame ``text`` with the others written in this turn of the event
        loop: one ``send()`` for all of them instead of one each (RFC 6455, 5.2: a server's
        frames are not masked; aiohttp writes each of its own frames whole, so they do not
        interleave)."""
        payload = text.encode()
        size = len(payload)
        if size < 126:
            header = _HEADER_SHORT.pack(_FIN_TEXT, size)
        elif size < 1 << 16:
            header = _HEADER_MEDIUM.pack(_FIN_TEXT, 126, size)
        else:
            header = _HEADER_LONG.pack(_FIN_TEXT, 127, size)
        if self._unflushed is None:
            self._unflushed = []
            asyncio.get_running_loop().call_soon(self._flush)
        self._unflushed += (header, payload)

    def _flush(self) -> None:
        frames, self._unflushed = self._unflushed, None
        transport = self._transport
        if frames and transport is not None and not transport.is_closing() \
                and not self.ws.closed:
            transport.write(b"".join(frames))
