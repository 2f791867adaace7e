"""The outbox: task messages leave only through here, and leave exactly once.

A message is queued in the same transaction as the task change it reports, sealed there when
the recipient's key is at hand (:func:`queue_message`: one fsync then covers both), else by the
sender loop on its first attempt; the envelope is kept, so the id never changes. The sender
loop hands it to the hub and deletes it once the hub took it. When the hub is down or refuses
for a while, the entry waits with exponential backoff; when the hub refuses it for good (too
large, unknown recipient) the owning side is told through ``on_refused``, which fails the task.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from anet_core.identity import Identity
from anet_core.link import UNKNOWN_AGENT_REASONS, HubError, HubLink, JoinState
from anet_core.metrics import NodeMetrics
from anet_core.protocol.envelope import SealKeys, seal
from anet_core.store import OutboxEntry, Store
from anet_core.tasks.common import Effects, Services
from anet_core.util.backoff import Backoff
from anet_core.util.canonical import compact_json
from anet_core.wire import TaskState

log = logging.getLogger(__name__)

PERMANENT_REFUSALS = UNKNOWN_AGENT_REASONS | {"envelope-too-large", "malformed-envelope",
                                              "wrong-sender", "too-large", "not-federated"}
"""Hub refusals that no retry can cure; anything else (unreachable, rate limits) is retried."""
RETRY = Backoff(first_s=0.5, cap_s=60.0, jitter=0.5)
"""Jittered, so many nodes do not return to a hub in step."""
IDLE_CHECK_S = 1.0
"""Also wake this often: the hub may have come back without anyone queuing anything."""
SEND_WINDOW = 32
"""Envelopes handed to the hub at once. The hub answers a send once the recipient took the
envelope (or stored it for an offline one), so one at a time would make every task wait for all
before it; a task's own envelopes still leave one after the other (a cancel never overtakes the
message it cancels, an update never the one before it)."""
PROGRESS_HOLD_S = 0.02
"""How long a plain progress update (see :func:`_is_progress`) waits before it leaves, in
case its task's end follows at once and says it all (:func:`_superseded`); the task's later
entries wait behind it, other tasks' entries do not."""

RefusalHandler = Callable[[OutboxEntry, HubError], Effects]
DeferralHandler = Callable[[OutboxEntry, HubError], Effects]
"""Told when the hub refused an entry for now for a reason the sender should see (its storage
is full or failing, or the hub is away): the entry is sent again later, and the task says why
it waits."""
TOLD_DEFERRALS = frozenset({"hub-storage-full", "hub-storage-error", "hub-unreachable",
                            "hub-timeout"})
AcceptanceHandler = Callable[[OutboxEntry], Effects]
"""Told when the hub took an entry that took more than one attempt (one the hub took at once
changes nothing but the outbox: ``Store.outbox_taken``). Runs in the commit that deletes the
entry, which is not flushed to disk (see ``Outbox._finish``): it may only write what accepting
the same envelope again redoes."""


def _is_progress(entry: OutboxEntry) -> bool:
    """A provider's update that only says WORKING or brings new artifacts (no status message,
    no reason), never sealed: what the task's terminal update says as well."""
    return entry.envelope is None and _is_progress_body(entry.body)


def _is_progress_body(body: dict[str, Any]) -> bool:
    return (body.get("type") == "task.update"
            and body["status"]["state"] == TaskState.TASK_STATE_WORKING
            and "message" not in body["status"] and not body.get("reason"))


def queue_message(store: Store, hub: HubLink, identity: Identity, peer_aid: str,
                  body: dict[str, Any], *, task_id: str, keys: SealKeys) -> None:
    """Queue ``body`` for ``peer_aid`` in the open transaction, sealed already when it can be
    (:func:`_seal_ahead`)."""
    store.enqueue(peer_aid, body, task_id=task_id,
                  envelope=_seal_ahead(hub, identity, peer_aid, body, keys))


def _seal_ahead(hub: HubLink, identity: Identity, peer_aid: str, body: dict[str, Any],
                keys: SealKeys) -> dict[str, Any] | None:
    """The envelope of ``body`` sealed as it is queued, so that it reaches the disk with the
    task change in one commit and one fsync, and the sender loop only sends it; None leaves
    the sealing to the sender loop: while the hub is not joined (an envelope is sealed when it
    can leave), when the recipient's key would have to be looked up, and for progress its
    task's end may still supersede (:func:`_superseded`)."""
    if hub.status.state is not JoinState.REGISTERED or _is_progress_body(body):
        return None
    peer = hub.cached_peer(peer_aid)
    if peer is None or not peer.encryption_key:
        return None
    try:
        return seal(identity, peer_aid, peer.encryption_key, body, keys=keys)
    except ValueError:
        return None  # the sender loop refuses it for good (see Outbox._send)


def _superseded(due: list[OutboxEntry]) -> list[OutboxEntry]:
    """Progress updates queued before their task's terminal update: they need not leave. The
    terminal update carries the final status, every artifact and the receipt, and the
    requester applies it at once (docs/protocol.md), so it says all they said; a backend that
    answers at once costs one envelope, not one per event. Without progress among them (the
    usual case: progress is never sealed as it is queued), no body is decoded."""
    progress = [(index, entry) for index, entry in enumerate(due) if _is_progress(entry)]
    if not progress:
        return []
    ended = {entry.task_id: index for index, entry in enumerate(due)
             if entry.body.get("type") == "task.update"
             and TaskState(entry.body["status"]["state"]).is_terminal}
    return [entry for index, entry in progress if index < ended.get(entry.task_id, -1)]


class Outbox:
    def __init__(self, *, store: Store, hub: HubLink, identity: Identity,
                 on_refused: RefusalHandler, on_accepted: AcceptanceHandler,
                 on_deferred: DeferralHandler, metrics: NodeMetrics,
                 services: Services) -> None:
        self._store = store
        self._metrics = metrics
        self._hub = hub
        self._identity = identity
        self._on_refused = on_refused
        self._on_accepted = on_accepted
        self._on_deferred = on_deferred
        self._services = services
        self._wake = asyncio.Event()
        self._held_until: float | None = None

    def wake(self) -> None:
        self._wake.set()

    async def run(self) -> None:
        """Send what is due, then sleep until woken, until the next retry, or a second."""
        while True:
            self._wake.clear()
            if self._hub.status.state is JoinState.REGISTERED:
                try:
                    await self.flush()
                except Exception:
                    log.exception("event=outbox-failed then=retry")
            next_at = self._store.outbox_next_attempt()
            now = time.time()
            if self._held_until is not None and self._held_until > now:
                # A due entry is the held one (or behind it): wake when its hold ends.
                due_now = next_at is None or next_at <= now
                next_at = self._held_until if due_now else min(next_at, self._held_until)
            delay = IDLE_CHECK_S if next_at is None else min(IDLE_CHECK_S,
                                                             max(0.0, next_at - time.time()))
            # asyncio.timeout, not wait_for: Python 3.11's wait_for can swallow a cancel that
            # arrives as the event fires, and the loop would then never stop.
            with suppress(TimeoutError):
                async with asyncio.timeout(delay):
                    await self._wake.wait()
            if not self._wake.is_set():
                # Nothing was queued meanwhile, so no transaction deleted what the hub took.
                self._store.outbox_forget_taken()

    async def flush(self) -> None:
        """Send due entries, each task's in order, up to :data:`SEND_WINDOW` at once; a task's
        entries stop at the first that must wait. A progress update younger than
        :data:`PROGRESS_HOLD_S` waits, and its task's later entries with it."""
        now = time.time()
        due = self._store.outbox_due(now)
        superseded = {entry.seq for entry in _superseded(due)}
        if superseded:
            with self._store.transaction(durable=False):
                for seq in superseded:
                    self._store.outbox_done(seq)
            log.debug("event=updates-superseded count=%d", len(superseded))
        held: set[str] = set()
        self._held_until = None
        by_task: dict[str, list[OutboxEntry]] = {}
        for entry in due:
            if entry.seq in superseded or entry.task_id in held:
                continue
            if _is_progress(entry) and entry.created_at + PROGRESS_HOLD_S > now:
                held.add(entry.task_id)
                until = entry.created_at + PROGRESS_HOLD_S
                self._held_until = min(self._held_until or until, until)
                continue
            by_task.setdefault(entry.task_id, []).append(entry)
        window = asyncio.Semaphore(SEND_WINDOW)

        async def in_order(entries: list[OutboxEntry]) -> None:
            for entry in entries:
                async with window:
                    if not await self._send(entry):
                        return  # the task's later entries wait behind this one

        if len(by_task) == 1:
            # One task's entries (the usual case) are sent from here, not from a task of their
            # own: the envelope leaves in this turn of the loop, not after what else is ready.
            # What it raises, run() logs; the entry stays due.
            (entries,) = by_task.values()
            await in_order(entries)
            return
        outcomes = await asyncio.gather(*(in_order(entries) for entries in by_task.values()),
                                        return_exceptions=True)
        for outcome in outcomes:
            if isinstance(outcome, Exception):
                log.error("event=outbox-send-failed error=%r", outcome, exc_info=outcome)

    async def _send(self, entry: OutboxEntry) -> bool:
        hub = self._hub
        try:
            envelope = entry.envelope
            if envelope is None:
                peer = await hub.peer(entry.peer_aid)
                if not peer.encryption_key:
                    raise HubError("unknown-agent",
                                   f"{entry.peer_aid} has no verified encryption key")
                sealed = seal(self._identity, entry.peer_aid, peer.encryption_key, entry.body,
                              keys=self._services.seal_keys)
                envelope = compact_json(sealed)
                with self._store.transaction(durable=False):
                    self._store.outbox_sealed(entry.seq, sealed["id"], envelope)
            # On disk before it leaves: the entry (its task's change) and, once sealed, the
            # envelope, so that a resend after any crash carries the same id.
            await self._store.flush()
            self._store.outbox_attempt(entry.seq)
            await hub.send(envelope)
            self._metrics.envelopes_sent.inc()
        except HubError as error:
            if error.reason in PERMANENT_REFUSALS:
                log.warning("event=envelope-refused-for-good id=%s task=%s reason=%s message=%r",
                            entry.envelope_id or "unsealed",
                            entry.task_id, error.reason, error.message)
                refusal = error  # the except block unbinds ``error`` when it ends
                await self._finish(entry, lambda: self._on_refused(entry, refusal))
                return True
            delay = RETRY.delay(entry.attempts)
            log.info("event=send-deferred task=%s reason=%s retryIn=%.1fs", entry.task_id,
                     error.reason, delay)
            if error.reason in TOLD_DEFERRALS:
                deferral = error
                with self._store.transaction(durable=False):
                    self._store.outbox_retry_later(entry.seq, time.time() + delay, error.reason)
                    effects = self._on_deferred(entry, deferral)
                    self._services.keep(effects)
                await self._services.run(effects)
                return False
            self._store.outbox_retry_later(entry.seq, time.time() + delay, error.reason)
            return False
        except ValueError as error:  # seal: oversize body or unusable key, no retry helps
            log.warning("event=seal-failed task=%s error=%r", entry.task_id, str(error))
            refusal = HubError("too-large", str(error))
            await self._finish(entry, lambda: self._on_refused(entry, refusal))
            return True
        if entry.attempts:
            await self._finish(entry, lambda: self._on_accepted(entry), durable=False)
        else:
            self._store.outbox_taken(entry.seq)
        return True

    async def _finish(self, entry: OutboxEntry, outcome: Callable[[], Effects], *,
                      durable: bool = True) -> None:
        # Accepted (durable=False): no fsync. Losing this commit to an OS crash only brings back
        # what a crash between the hub's answer and the commit always could: the entry, sealed,
        # is sent again under the same envelope id, which the receiver drops as a replay, and
        # Store.outbox_only_unsent() counts it as maybe sent (a restart forgets which entries
        # were sealed ahead and never handed over). A refusal fails the task
        # and records evidence, so it stays durable.
        with self._store.transaction(durable=durable):
            self._store.outbox_done(entry.seq)
            effects = outcome()
            self._services.keep(effects)
        await self._services.run(effects)
