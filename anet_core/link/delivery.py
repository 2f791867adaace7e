"""Envelopes the hub delivers: handed to the receiver one at a time, acknowledged once kept.

The hub forgets an envelope when the node acknowledges it, so the acknowledgement goes out only
after the receiver returned and the receiver's flush made what it kept durable, a few turns of
the loop later (``ACK_AFTER_TURNS``), while the next envelope is already being taken; unless the
sender may be waiting for it, the flush is the next one made anyway (``AckTiming``,
``ACK_HOLD_S``). An envelope the receiver failed on is retried on the same connection with
backoff, the later envelopes of its sender waiting behind it and those of other senders going on
(docs/protocol.md, "Relay and delivery").
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from anet_core.link.connection import Channel
from anet_core.link.contract import AckTiming, EnvelopeReceiver, Flush
from anet_core.util.backoff import Backoff

log = logging.getLogger(__name__)

ACK_AFTER_TURNS = 3
"""How many turns of the event loop the acknowledgement of a kept envelope waits: the loop first
does what the envelope started (the answer to an A2A client; the forward to a backend, which
writes its request on the third turn: the module's task, the forwarder's turn, the reader of the
backend's answer), and the hub and the sender, which the acknowledgement wakes, do not take a
core from that work meanwhile. The acknowledgements due by then go out together. One that a
closing connection takes with it only makes the hub deliver the envelope again, which the
receiver drops as a repeat."""
ACK_HOLD_S = 0.01
"""How long the acknowledgement of an envelope that nothing waits for
(``AckTiming.WITH_NEXT_FLUSH``) waits for a flush made anyway before it makes its own. On the
bench the client's next message mostly comes within it, and its commit's fsync covers the
answer before it as well: alice syncs 1.4 times per task instead of 2 (docs/performance.md,
"The seventeenth pass"). The hub keeps the envelope that much longer, and the sender hears
later that it was taken."""
RECEIVE_RETRY = Backoff(first_s=0.5, cap_s=30.0)
"""An envelope the receiver failed on is tried again after 0.5 s, doubling to 30 s; not
jittered: the receiver is this node's own, nobody else retries against it."""


@dataclass(eq=False)
class Held:
    """A delivered envelope not acknowledged yet."""

    envelope: dict[str, Any]
    id: str
    sender: str
    failures: int = 0
    due: float = 0.0


class DeliveryQueue:
    """The envelopes one connection delivered and the receiver has not taken yet, and the order
    in which to give them to it.

    In hub order (storage order per recipient), except that an envelope the receiver failed on
    waits for its retry (``RECEIVE_RETRY``), and the later envelopes from the **same sender**
    wait behind it (a cancel must not overtake the message it cancels); envelopes from other
    senders go on. A retry that is due goes before new envelopes. An id already held is not
    taken twice (a hub may deliver an envelope again on one connection).
    """

    def __init__(self) -> None:
        self._fresh: deque[Held] = deque()
        self._failed: dict[str, Held] = {}
        self._ids: set[str] = set()
        self._changed = asyncio.Event()

    def __len__(self) -> int:
        return len(self._fresh) + len(self._failed)

    def add(self, envelope: dict[str, Any]) -> bool:
        envelope_id = envelope.get("id")
        sender = envelope.get("from")
        if not isinstance(envelope_id, str):
            log.warning("event=delivery-refused reason=no-id from=%r", str(sender)[:80])
            return False
        if envelope_id in self._ids:
            # Every envelope not handed on is logged, so an operator sees each one a hub or a
            # sender repeated, not a sample of them.
            log.info("event=delivery-repeated id=%s from=%r", envelope_id[:80], str(sender)[:80])
            return False
        self._ids.add(envelope_id)
        self._fresh.append(Held(envelope, envelope_id, sender if isinstance(sender, str) else ""))
        self._changed.set()
        return True

    def take(self, now: float) -> tuple[Held | None, float | None]:
        """The next envelope to try now, or None and when a retry falls due (None: nothing
        waits)."""
        due = [held for held in self._failed.values() if held.due <= now]
        if due:
            return min(due, key=lambda held: held.due), None
        for held in self._fresh:
            if held.sender not in self._failed:
                self._fresh.remove(held)
                return held, None
        return None, min((held.due for held in self._failed.values()), default=None)

    async def next(self) -> Held:
        while True:
            self._changed.clear()
            held, wake = self.take(time.monotonic())
            if held is not None:
                return held
            timeout = None if wake is None else max(0.0, wake - time.monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout)

    def done(self, held: Held) -> None:
        if self._failed.get(held.sender) is held:
            del self._failed[held.sender]
        self._ids.discard(held.id)

    def failed(self, held: Held, now: float) -> float:
        """Keep ``held`` for a retry; the delay until then."""
        held.failures += 1
        delay = RECEIVE_RETRY.delay(held.failures - 1)
        held.due = now + delay
        self._failed[held.sender] = held
        return delay


class Acknowledgements:
    """The kept envelopes one connection has not acknowledged yet, sent
    :data:`ACK_AFTER_TURNS` turns of the loop after the first of them, once ``flush`` made what
    the receiver kept of them durable (one flush for all of them): a flush of their own when a
    sender may wait for one of them, else the next one made anyway (:data:`ACK_HOLD_S`)."""

    def __init__(self, channel: Channel, flush: Flush) -> None:
        self._channel = channel
        self._flush = flush
        self._ids: list[str] = []
        self._at_once = False

    def add(self, envelope_id: str, timing: AckTiming) -> None:
        self._ids.append(envelope_id)
        self._at_once |= timing is AckTiming.AT_ONCE
        if len(self._ids) == 1:
            self._channel.spawn(self._send_soon(), name="hub-acknowledgements")

    async def _send_soon(self) -> None:
        for _ in range(ACK_AFTER_TURNS):
            await asyncio.sleep(0)
        ids, self._ids = self._ids, []
        at_once, self._at_once = self._at_once, False
        try:
            await self._flush(0.0 if at_once else ACK_HOLD_S)
        except OSError as error:  # the disk
            # Kept but not durable: unacknowledged, the hub delivers them again on the next
            # connection, and the receiver takes them afresh or drops them as repeats.
            log.error("event=acknowledgements-withheld envelopes=%d error=%r", len(ids), error)
            return
        for envelope_id in ids:
            await self._channel.send({"type": "ack", "id": envelope_id})


class Delivery:
    """Feeds the receiver from each registered connection in turn.

    ``on_failure`` is told the sender of an envelope the receiver failed on, so the retry looks
    the sender up afresh (its keys may have changed).
    """

    def __init__(self, *, on_failure: Callable[[str], None]) -> None:
        self._on_failure = on_failure
        self._receiver: EnvelopeReceiver | None = None
        self._flush: Flush = _nothing_to_flush
        self._receiver_set = asyncio.Event()

    def set_receiver(self, receiver: EnvelopeReceiver, *, flush: Flush | None = None) -> None:
        self._receiver = receiver
        self._flush = flush or _nothing_to_flush
        self._receiver_set.set()

    def attach(self, channel: Channel) -> None:
        """Take the envelopes ``channel`` delivers, for as long as it is open."""
        inbox = DeliveryQueue()
        channel.on_deliver = inbox.add
        acks = Acknowledgements(channel, lambda within: self._flush(within))
        channel.spawn(self._deliver_forever(inbox, acks), name="hub-delivery")

    async def _deliver_forever(self, inbox: DeliveryQueue, acks: Acknowledgements) -> None:
        """One at a time, in the order of ``DeliveryQueue``: the receiver keeps the envelope,
        then the hub forgets it. A failure is retried here, on this connection."""
        while True:
            held = await inbox.next()
            await self._receiver_set.wait()
            assert self._receiver is not None
            try:
                timing = await self._receiver(held.envelope)
            except Exception as error:
                delay = inbox.failed(held, time.monotonic())
                if held.sender:
                    self._on_failure(held.sender)
                log.warning("event=receive-failed id=%s from=%s attempt=%d retryIn=%.1fs "
                            "error=%r", held.id, held.sender, held.failures, delay, error,
                            exc_info=held.failures == 1)
                continue
            inbox.done(held)
            if held.failures:
                log.info("event=receive-recovered id=%s attempts=%d", held.id, held.failures + 1)
            acks.add(held.id, timing or AckTiming.AT_ONCE)


async def _nothing_to_flush(within: float) -> None:
    """A receiver that keeps what it needs durably before it returns."""
