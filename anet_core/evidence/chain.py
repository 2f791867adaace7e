"""The daemon's writer of the evidence chain: records from the event loop gathered into appends,
the journal that keeps them until the chain holds them on disk, the head moved when idle, and
recovery at start (the format and the guarantees are in the package's docstring,
``anet_core/evidence/__init__.py``)."""

from __future__ import annotations

import asyncio
import logging
import sqlite3
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from anet_core.evidence.file import (
    HEAD_EVERY_RECORDS,
    MAX_APPEND_RECORDS,
    MAX_HEAD_LAG,
    ChainFile,
    EvidenceError,
)
from anet_core.evidence.format import CHAINED_FIELDS, check_item, encode_data
from anet_core.identity.keystore import Identity
from anet_core.store import JournaledRecord
from anet_core.util.canonical import canonical_json

log = logging.getLogger(__name__)

HEAD_IDLE_S = 0.5
APPEND_AFTER_S = 0.02
"""How long queued records wait before their append, unless a caller waits for them or for
records queued after them (:meth:`EvidenceChain.record_all`), or an append's worth waits
(:data:`MAX_APPEND_RECORDS`). The journal keeps them meanwhile, so the wait costs nothing in
durability; it gathers the records of the tasks handled in that time into one append, one
signature and one write (tasks one after another on the bench's network share appends two or
three at a time: docs/performance.md, "The thirteenth pass"). And the append runs after the work
their transaction started: a forward to a backend writes its request three turns of the loop
after its records were queued."""


class EvidenceJournal(Protocol):
    """Where the daemon's records wait until the chain holds them on disk (the node's Store)."""

    def journal_evidence(self, records: list[JournaledRecord]) -> list[JournaledRecord]: ...

    def journaled_evidence(self) -> list[JournaledRecord]: ...

    def forget_evidence(self, through: int) -> None: ...

    def flush_now(self, through: int | None = None) -> None: ...


@dataclass
class _Waiting:
    """A record queued for the chain from the event loop."""

    kind: str
    data: dict[str, Any]
    data_json: bytes
    """``data`` as canonical JSON (:func:`encode_data`): what the journal keeps, and what the
    append hashes and writes."""
    ts: int
    journal_id: int | None
    """Its id in the journal; None when it is not kept there (its append is synced)."""
    journal_change: int
    """The store's count of changes once the journal kept it (``JournaledRecord.change``)."""
    future: asyncio.Future[dict[str, Any]] | None
    """Where its caller waits for it (:meth:`EvidenceChain.record_all`); None for the records
    of :meth:`EvidenceChain.keep`, whose failure is logged."""


@dataclass(frozen=True)
class KeptRecords:
    """Records :meth:`EvidenceChain.keep` kept in the journal, not yet queued for the chain."""

    waiting: list[_Waiting]


class EvidenceChain(ChainFile):
    """A :class:`ChainFile` with the event loop's writer and the daemon's journal. :meth:`append`
    blocks for the fsyncs; from asyncio, use :meth:`record` (or :meth:`keep` and :meth:`queue`),
    which lets records that wait at the same time share one append (one signature, one write),
    and with a ``journal`` needs no fsync of the chain (see the module docstring)."""

    def __init__(self, path: Path, identity: Identity,
                 journal: EvidenceJournal | None = None) -> None:
        super().__init__(path, identity)
        self._journal = journal
        self._forgotten_through = 0
        """The last journal id the journal forgot."""
        self._waiting: list[_Waiting] = []
        self._queued_from_loop = False
        """Records went through the loop's writer: :meth:`append` would overtake them."""
        self._due: asyncio.Handle | None = None
        """The append of what waits, scheduled; ``_due_soon``: without APPEND_AFTER_S."""
        self._due_soon = False
        self._in_thread: asyncio.Future[None] | None = None
        """An append that syncs the chain, or a move of the head, running in a thread."""
        self._idle_timer: asyncio.TimerHandle | None = None
        self._idle_since = 0.0
        """Loop time of the last append from the loop (the head moves once it is old)."""

    def append(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        """Append a record, fsync it, move the head; return the record as stored. Not on a
        chain the event loop appends to (:meth:`record`, :meth:`keep`): the record would go
        ahead of those queued there, out of order."""
        if self._queued_from_loop:
            raise RuntimeError("this chain's records go through the event loop; append with "
                               "`await chain.record(kind, data)`, behind those queued before")
        outcome = self.append_all([(kind, data)])[0]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def recover(self) -> int:
        """Append the journal's records that the chain lacks, then empty the journal; return
        how many were appended. Run at start, before anything else appends.

        The journal keeps a record from before the commit it describes was flushed until the
        chain was synced after it: a crash of the daemon leaves its records both in the chain
        and the journal, one of the machine may have taken them from the chain's tail. A
        record counts as in the chain when one of its last records has the same ts, kind and
        data (they are appended in journal order, so at most the journal's length plus the
        records of other writers meanwhile back: :data:`MAX_HEAD_LAG` are looked at)."""
        assert self._journal is not None
        kept = self._journal.journaled_evidence()
        if not kept:
            return 0
        present = Counter(_content_key(record["ts"], record["kind"], record["data"])
                          for record in self._last_records(len(kept) + MAX_HEAD_LAG)
                          if isinstance(record, dict) and CHAINED_FIELDS <= record.keys())
        missing = []
        for record in kept:
            key = _content_key(record.ts, record.kind, record.data)
            if present[key]:
                present[key] -= 1
            else:
                missing.append(record)
        try:
            for start in range(0, len(missing), MAX_APPEND_RECORDS):
                batch = missing[start:start + MAX_APPEND_RECORDS]
                for record, outcome in zip(batch, self.append_all(
                        [(record.kind, record.data) for record in batch],
                        times=[record.ts for record in batch]), strict=True):
                    if isinstance(outcome, Exception):
                        log.error("event=evidence-failed kind=%s error=%r", record.kind, outcome)
        except (OSError, EvidenceError) as error:  # the disk, or a damaged chain
            # The journal keeps them all: the next start finds those appended by now.
            log.error("event=evidence-recovery-failed kept=%d error=%r", len(kept), error)
            return 0
        assert kept[-1].id is not None
        self._journal.forget_evidence(kept[-1].id)
        if missing:
            log.warning("event=evidence-recovered records=%d", len(missing))
        return len(missing)

    async def record(self, kind: str, data: dict[str, Any]) -> dict[str, Any]:
        """Append a record from the event loop; return it once it is on disk (see
        :meth:`record_all`)."""
        outcome = (await self.record_all([(kind, data)]))[0]
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    async def record_all(self, items: list[tuple[str, dict[str, Any]]]
                         ) -> list[dict[str, Any] | Exception]:
        """Append records from the event loop, in this order, behind every record queued before
        them; return once they are on disk (in the chain, or kept by the journal and flushed),
        per item the record or the error that kept it out (as :meth:`append_all`).

        They go to the chain at once, with the records that wait for their moment
        (:data:`APPEND_AFTER_S`); records that arrive while an append runs in a thread wait for
        it and then go together, in the order they arrived (group commit). A caller that is
        cancelled meanwhile does not take its records back."""
        loop = asyncio.get_running_loop()
        futures, waiting = self._checked(items, loop.create_future)
        self._journaled(waiting)  # the append flushes the journal first
        self._enqueue(waiting, soon=True)
        return await asyncio.shield(asyncio.gather(*futures, return_exceptions=True))

    def record_later(self, kind: str, data: dict[str, Any]) -> None:
        """Queue a record for the chain without waiting for it (:meth:`keep` and :meth:`queue`
        at once); an append that fails is logged."""
        self.queue(self.keep([(kind, data)]))

    def keep(self, items: Sequence[tuple[str, dict[str, Any]]]) -> KeptRecords:
        """Keep records in the journal inside its open transaction, the one that makes the
        change they describe: both reach the disk together, or neither does (two commits could
        be parted by a crash of the machine, docs/performance.md "Durability"). Hand them to
        :meth:`queue` once that transaction committed, before the loop runs anything else: the
        journal forgets records by id, up to the last one appended, so records are queued in the
        order of their ids. A rollback takes them back, and they are never queued. Nobody waits
        for them: an append that fails is logged."""
        _, waiting = self._checked(items, None)
        self._journaled(waiting)
        return KeptRecords(waiting)

    def queue(self, kept: KeptRecords) -> None:
        """Queue records :meth:`keep` kept, once their transaction committed: they go to the
        chain after :data:`APPEND_AFTER_S`."""
        self._enqueue(kept.waiting, soon=False)

    def _checked(self, items: Sequence[tuple[str, dict[str, Any]]],
                 new_future: Callable[[], asyncio.Future[dict[str, Any]]] | None,
                 ) -> tuple[list[asyncio.Future[dict[str, Any]]], list[_Waiting]]:
        """The items fit for the chain, and with ``new_future`` a future for each item (the
        others' futures hold the error that keeps them out; without, that error is logged)."""
        now = int(time.time() * 1000)
        futures, waiting = [], []
        for kind, data in items:
            future = None if new_future is None else new_future()
            if future is not None:
                futures.append(future)
            try:
                check_item(kind, data)
                data_json = encode_data(data)
            except (TypeError, ValueError) as error:
                _settle(kind, future, error)
                continue
            waiting.append(_Waiting(kind, data, data_json, now, None, 0, future))
        return futures, waiting

    def _journaled(self, waiting: list[_Waiting]) -> None:
        """Keep ``waiting`` in the journal (in its open transaction, if any)."""
        if self._journal is None or not waiting:
            return
        try:
            kept = self._journal.journal_evidence(
                [JournaledRecord(item.ts, item.kind, item.data, item.data_json.decode())
                 for item in waiting])
        except sqlite3.Error as error:  # then their append is synced, as without a journal
            log.error("event=evidence-journal-failed error=%r", error)
        else:
            for item, record in zip(waiting, kept, strict=True):
                item.journal_id, item.journal_change = record.id, record.change

    # The writer: callbacks of the loop, no task of its own. An append that needs no fsync (the
    # journal keeps its records) runs in the callback that is due; one that syncs the chain (or
    # moves the head) runs in a thread, and records queued meanwhile wait for it.

    def _enqueue(self, waiting: list[_Waiting], *, soon: bool) -> None:
        self._queued_from_loop = True
        if waiting:
            self._waiting += waiting
            # A full append's worth goes at once: waiting longer gathers nothing more into it.
            self._schedule_append(soon=soon or len(self._waiting) >= MAX_APPEND_RECORDS)

    def _schedule_append(self, *, soon: bool) -> None:
        """Append what waits: ``soon``, once the loop ran what is ready now (what the records'
        transaction started), else after :data:`APPEND_AFTER_S` (it gathers more records)."""
        if self._in_thread is not None:
            return  # it appends what waits when it is done
        if self._due is not None:
            if not soon or self._due_soon:
                return
            self._due.cancel()
        loop = asyncio.get_running_loop()
        self._due_soon = soon
        self._due = (loop.call_soon(self._append_due) if soon
                     else loop.call_later(APPEND_AFTER_S, self._append_due))

    def _append_due(self) -> None:
        self._due = None
        while self._waiting:
            batch = self._waiting[:MAX_APPEND_RECORDS]
            del self._waiting[:MAX_APPEND_RECORDS]
            journal_ids = [item.journal_id for item in batch if item.journal_id is not None]
            if len(journal_ids) < len(batch):
                journal_ids = []  # a record the journal does not keep: this append is synced
            if self._lag() + len(batch) >= HEAD_EVERY_RECORDS or not journal_ids:
                # This append syncs the chain, and may move the head (a file written, synced
                # and renamed, and its directory synced): in a thread, so that the loop does not
                # wait for the disk.
                self._in_thread = asyncio.ensure_future(self._append_in_thread(batch, journal_ids))
                return
            try:
                self._flush_journal(batch)
                outcomes = self.append_all([(item.kind, item.data) for item in batch],
                                           head=False, times=[item.ts for item in batch],
                                           journal_ids=journal_ids,
                                           encoded=[item.data_json for item in batch])
            except (OSError, EvidenceError) as error:  # the disk, or a chain and its head
                outcomes = [error] * len(batch)
            _settle_all(batch, outcomes)
        self._forget_synced()  # a chain's first record is synced (append_all)
        self._idle_since = asyncio.get_running_loop().time()
        self._watch_idle()

    async def _append_in_thread(self, batch: list[_Waiting], journal_ids: list[int]) -> None:
        try:
            self._flush_journal(batch)
            outcomes = await asyncio.to_thread(
                self.append_all, [(item.kind, item.data) for item in batch], head=False,
                times=[item.ts for item in batch], journal_ids=journal_ids,
                encoded=[item.data_json for item in batch])
        except (OSError, EvidenceError) as error:
            outcomes = [error] * len(batch)
        finally:
            self._in_thread = None
        _settle_all(batch, outcomes)
        self._forget_synced()
        if self._waiting:
            self._schedule_append(soon=True)  # they waited for this append already
        else:
            self._idle_since = asyncio.get_running_loop().time()
            self._watch_idle()

    def _flush_journal(self, batch: list[_Waiting]) -> None:
        """A record reaches the chain only once its journal row is on disk, so a crash of the
        machine cannot leave the chain a record of a commit the store lost (an update applied
        again once its envelope came back would be in it twice). Rows a flush since their
        commit made durable (the usual case: their change's own flush) need no fsync, whatever
        else was committed meanwhile."""
        kept = [item.journal_change for item in batch if item.journal_id is not None]
        if self._journal is not None and kept:
            self._journal.flush_now(through=max(kept))

    def _watch_idle(self) -> None:
        """Move the head once no record came for :data:`HEAD_IDLE_S` (one write, not one per
        append). One timer watches: when it fires early, it waits for the rest."""
        if self._idle_timer is None and self._last is not None and self._last != self._head:
            self._idle_timer = asyncio.get_running_loop().call_later(HEAD_IDLE_S, self._idle)

    def _idle(self) -> None:
        self._idle_timer = None
        loop = asyncio.get_running_loop()
        quiet_for = loop.time() - self._idle_since
        if self._waiting or self._in_thread is not None:
            return  # their append watches again
        if quiet_for < HEAD_IDLE_S:
            self._idle_timer = loop.call_later(HEAD_IDLE_S - quiet_for, self._idle)
        else:
            self._in_thread = asyncio.ensure_future(self._move_head_in_thread())

    async def _move_head_in_thread(self) -> None:
        try:
            await asyncio.to_thread(self.move_head)
            self._forget_synced()
        except (OSError, EvidenceError) as error:
            log.error("event=evidence-head-failed error=%r", error)
        finally:
            self._in_thread = None
        if self._waiting:
            self._schedule_append(soon=True)

    def _cancel_timers(self) -> None:
        for timer in (self._due, self._idle_timer):
            if timer is not None:
                timer.cancel()
        self._due = self._idle_timer = None

    def _forget_synced(self) -> None:
        """Tell the journal what the chain now holds on disk (on the loop: the store's)."""
        through = self._synced_through
        if self._journal is not None and through > self._forgotten_through:
            self._journal.forget_evidence(through)
            self._forgotten_through = through

    async def close(self) -> None:
        """Write what is queued, sync the chain and move the head (the node stops)."""
        while True:
            self._cancel_timers()
            if self._in_thread is not None:
                await asyncio.shield(self._in_thread)
            elif self._waiting:
                self._append_due()
            else:
                break
        try:
            await asyncio.to_thread(self.move_head)
            self._forget_synced()
        except (OSError, EvidenceError) as error:  # the chain moved away or was damaged
            log.error("event=evidence-head-failed error=%r", error)


def _content_key(ts: int, kind: str, data: dict[str, Any]) -> tuple[int, str, bytes]:
    """What tells a record from the others in :meth:`EvidenceChain.recover`."""
    return ts, kind, canonical_json(data)


def _settle(kind: str, future: asyncio.Future[dict[str, Any]] | None,
            outcome: dict[str, Any] | Exception) -> None:
    """Tell the record's caller its outcome; log a failure nobody waits for."""
    if future is None:
        if isinstance(outcome, Exception):
            log.error("event=evidence-failed kind=%s error=%r", kind, outcome)
    elif future.done():
        pass
    elif isinstance(outcome, Exception):
        future.set_exception(outcome)
    else:
        future.set_result(outcome)


def _settle_all(batch: list[_Waiting], outcomes: list[dict[str, Any] | Exception]) -> None:
    for item, outcome in zip(batch, outcomes, strict=True):
        _settle(item.kind, item.future, outcome)
