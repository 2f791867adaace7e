"""Writing the evidence chain: appends, the head, and the daemon's journal (the format and the
guarantees are in the package's docstring, ``anet_core/evidence/__init__.py``)."""

from __future__ import annotations

import asyncio
import fcntl
import hashlib
import json
import logging
import os
import re
import sqlite3
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any, Protocol

from anet_core.identity.keystore import Identity, Signer
from anet_core.identity.signatures import EVIDENCE_CONTEXT, SIGNATURE_BYTES
from anet_core.store import JournaledRecord
from anet_core.util.canonical import b64u, canonical_json, canonical_with, is_non_negative_int
from anet_core.util.fsutil import write_atomic

log = logging.getLogger(__name__)

HEAD_FILE = "head.json"
HEAD_CONTEXT = "anet-evidence-head-v1"
KIND_PATTERN = re.compile(r"\A[a-z][a-z0-9_-]*(?:\.[a-z][a-z0-9_-]*)+\Z")
"""Dotted lowercase, at least two segments. The first names who records it: ``task`` for the
core's task layer (``task.accepted``), else the module (``backends.forwarded``). Only the shape
is checked, so records written under earlier names still verify."""
MAX_KIND_LENGTH = 100
MAX_RECORD_BYTES = 256 * 1024
CHAINED_FIELDS = frozenset({"seq", "ts", "kind", "data", "prev", "hash"})
"""What every record holds; the last record of each append holds :data:`SIGNATURE_FIELDS` too."""
SIGNATURE_FIELDS = frozenset({"signer", "keySeq", "signature"})
_TAIL_READ_BLOCK = 64 * 1024
MAX_APPEND_RECORDS = 64
"""Most records one append writes (one fsync of the chain for all of them)."""
HEAD_EVERY_RECORDS = 32
"""Appends from the event loop (:meth:`EvidenceChain.record_all`) move the head once it lags
this many records, and whenever no record came for :data:`HEAD_IDLE_S`, and when the node
stops; the head then lags the chain by at most this plus one append."""
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
MAX_HEAD_LAG = HEAD_EVERY_RECORDS + MAX_APPEND_RECORDS
"""How far behind the chain a crash may leave the head (see ``_current_tail``)."""


class EvidenceJournal(Protocol):
    """Where the daemon's records wait until the chain holds them on disk (the node's Store)."""

    def journal_evidence(self, records: list[JournaledRecord]) -> list[JournaledRecord]: ...

    def journaled_evidence(self) -> list[JournaledRecord]: ...

    def forget_evidence(self, through: int) -> None: ...

    def flush_now(self, through: int | None = None) -> None: ...


class EvidenceError(Exception):
    """The chain cannot be appended to; the message says why and what to do."""


@dataclass(frozen=True)
class EvidenceHead:
    """A checkpoint: the chain had a record ``seq`` with this ``hash``."""

    seq: int
    hash: str


def check_kind(kind: object) -> str:
    """Return ``kind`` when it is dotted lowercase; raise ``ValueError`` naming it otherwise."""
    if not isinstance(kind, str) or len(kind) > MAX_KIND_LENGTH or not KIND_PATTERN.match(kind):
        raise ValueError(f"evidence kind {kind!r} must be dotted lowercase such as "
                         f"'task.accepted' (at most {MAX_KIND_LENGTH} characters)")
    return kind


def record_hash(seq: int, ts: int, kind: str, data: dict[str, Any], prev: str | None) -> str:
    """base64url SHA-256 of the canonical chained content of a record."""
    return _hash_of(canonical_with("data", canonical_json(data),
                                   {"seq": seq, "ts": ts, "kind": kind, "prev": prev}))


def _hash_of(chained_json: bytes) -> str:
    """A record's hash from its chained content as canonical JSON. ``data`` sorts before every
    other key of a record, so :func:`canonical_with` encodes it once for the hash, the signed
    bytes and the line."""
    return b64u(hashlib.sha256(chained_json).digest())


@dataclass
class _Unsigned:
    """A record made for an append and not signed yet: the append signs its last record only
    (:func:`_lines`), whose hash chains every record before it."""

    index: int
    """Its item's place among the append's items."""
    data: dict[str, Any]
    data_json: bytes
    fields: dict[str, Any]
    """Every member but ``data``: seq, ts, kind, prev and hash (then, if it ends the append,
    the signature's)."""
    chained: bytes
    """The chained content (every member but the hash and the signature's), as hashed."""
    signed_size: int
    """The length of its line, newline included, were it signed: what
    :data:`MAX_RECORD_BYTES` limits, for every record alike."""

    @classmethod
    def make(cls, index: int, kind: str, data: dict[str, Any], last: EvidenceHead | None,
             ts: int | None, signer: Signer, data_json: bytes | None = None) -> _Unsigned:
        """The record after ``last``; ``data_json``: the data's canonical JSON when the caller
        has it (:func:`encode_data`)."""
        if data_json is None:
            data_json = encode_data(data)
        fields: dict[str, Any] = {"seq": 0 if last is None else last.seq + 1,
                                  "ts": int(time.time() * 1000) if ts is None else ts,
                                  "kind": kind, "prev": None if last is None else last.hash}
        chained = canonical_with("data", data_json, fields)
        fields["hash"] = _hash_of(chained)
        # The line is the chained content with the member "hash":"…" (base64url needs no
        # escapes) and its comma, the signature's members, and the newline.
        size = len(chained) + len(fields["hash"]) + 10 + \
            _signature_bytes(signer.aid, signer.key_seq) + 1
        return cls(index, data, data_json, fields, chained, size)

    def line(self) -> bytes:
        """The record as the chain holds it, without the newline. An unsigned record's line is
        its chained content with the member ``"hash":"…",`` after ``data`` (``hash`` sorts
        between ``data`` and ``kind``; base64url needs no escapes): spliced in, not encoded
        again."""
        if "signature" in self.fields:
            return canonical_with("data", self.data_json, self.fields)
        cut = len(b'{"data":') + len(self.data_json) + 1
        return b"".join((self.chained[:cut], b'"hash":"', self.fields["hash"].encode(), b'",',
                         self.chained[cut:]))


def encode_data(data: dict[str, Any]) -> bytes:
    """A record's data as canonical JSON, encoded once for the journal, the hash and the line;
    ``ValueError`` for data with a value JSON has no form for (an object, NaN)."""
    try:
        return canonical_json(data)
    except (TypeError, ValueError) as error:
        raise ValueError(f"evidence data is not JSON: {error}") from None


def _lines(records: list[_Unsigned], signer: Signer,
           outcomes: list[dict[str, Any] | Exception]) -> bytearray:
    """The chain's lines for the records of one append, the last one signed; each record as
    stored becomes its item's outcome."""
    last = records[-1]
    last.fields |= {"signer": signer.aid, "keySeq": signer.key_seq}
    signature = signer.sign(canonical_with("data", last.data_json, last.fields),
                            context=EVIDENCE_CONTEXT)
    last.fields["signature"] = b64u(signature)
    lines = bytearray()
    for record in records:
        lines += record.line() + b"\n"
        outcomes[record.index] = {"data": record.data} | record.fields
    return lines


@cache
def _signature_bytes(aid: str, key_seq: int) -> int:
    """How much longer the signature's members make a record's line: three members and their
    commas."""
    members = {"signer": aid, "keySeq": key_seq, "signature": b64u(bytes(SIGNATURE_BYTES))}
    return len(canonical_json(members)) - 1


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


class EvidenceChain:
    """Appends hash-chained records to a chain file, the last record of each append signed.
    Thread-safe, and safe with other processes appending to the same file (an exclusive
    ``flock`` is held per append and the tail is re-read when the file changed). :meth:`append`
    blocks for the fsyncs; from asyncio, use :meth:`record` (or :meth:`keep` and :meth:`queue`),
    which lets records that wait at the same time share one append (one signature, one write),
    and with a ``journal`` needs no fsync of the chain (see the module docstring)."""

    def __init__(self, path: Path, identity: Identity,
                 journal: EvidenceJournal | None = None) -> None:
        self._path = Path(path)
        self._head_path = self._path.with_name(HEAD_FILE)
        self._identity = identity
        self._journal = journal
        self._lock = threading.Lock()
        self._known_size: int | None = None
        self._last: EvidenceHead | None = None
        self._head: EvidenceHead | None = None
        """The head this chain wrote last."""
        self._unsynced = False
        """Records were written since the chain's last fsync."""
        self._appended_through = 0
        self._synced_through = 0
        self._forgotten_through = 0
        """Journal ids: the last appended, the last on disk, the last the journal forgot."""
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

    @property
    def path(self) -> Path:
        return self._path

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

    def append_all(self, items: Sequence[tuple[str, dict[str, Any]]], *, head: bool = True,
                   times: Sequence[int] | None = None, journal_ids: Sequence[int] = (),
                   encoded: Sequence[bytes] | None = None,
                   ) -> list[dict[str, Any] | Exception]:
        """Append records in this order, with one signature (of the last record: its hash
        chains the others), one fsync and one move of the head; per item the record as stored,
        or the error that kept it out (a bad kind, data or size: the others are appended all
        the same). ``times``: each record's ``ts`` (unix ms) when it was made earlier than now.
        ``head`` False: the head moves only once it lags :data:`HEAD_EVERY_RECORDS` (the caller
        moves it later, :meth:`move_head`). ``journal_ids``: the journal keeps these records, so
        the append is not synced unless the head moves. ``encoded``: each item's data as
        canonical JSON, when the caller encoded it already (:func:`encode_data`)."""
        if len(items) > MAX_APPEND_RECORDS:
            raise ValueError(f"{len(items)} records in one append; at most "
                             f"{MAX_APPEND_RECORDS}")
        outcomes: list[dict[str, Any] | Exception] = []
        for kind, data in items:
            try:
                _check_item(kind, data)
                outcomes.append({})
            except (TypeError, ValueError) as error:
                outcomes.append(error)
        with self._lock:
            fd = self._open()
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                last = self._current_tail(fd)
                # A chain without a head may hold one record only (verify's no-head): a first
                # record that a crash left headless gets its head before another follows, and
                # a new chain's first record gets it at once, whatever ``head`` asks. (Once
                # this chain wrote a head, it knows there is one.)
                if last is not None and self._head is None and not self._head_path.exists():
                    self._sync(fd)
                    self._write_head(last)
                headless = last is None
                signer = self._identity.signer()
                written: list[_Unsigned] = []
                for index, (kind, data) in enumerate(items):
                    if isinstance(outcomes[index], Exception):
                        continue
                    if written and headless:
                        self._write_lines(fd, _lines(written, signer, outcomes), last, head=True,
                                          sync=True, through=None)
                        written, headless = [], False
                    try:
                        record = _Unsigned.make(index, kind, data, last,
                                                None if times is None else times[index], signer,
                                                None if encoded is None else encoded[index])
                    except ValueError as error:  # data that is no JSON: this record only
                        outcomes[index] = error
                        continue
                    if record.signed_size > MAX_RECORD_BYTES:
                        outcomes[index] = ValueError(
                            f"evidence record of {record.signed_size} bytes exceeds "
                            f"{MAX_RECORD_BYTES}; record hashes, not content")
                        continue
                    written.append(record)
                    last = EvidenceHead(record.fields["seq"], record.fields["hash"])
                if written:
                    self._write_lines(fd, _lines(written, signer, outcomes), last,
                                      head=head or headless, sync=not journal_ids,
                                      through=max(journal_ids, default=None))
            finally:
                os.close(fd)  # also releases the flock
        return outcomes

    def _open(self) -> int:
        try:
            return os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)
        except FileNotFoundError:
            self._path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
            return os.open(self._path, os.O_RDWR | os.O_CREAT | os.O_APPEND, 0o644)

    def _write_lines(self, fd: int, lines: bytearray, last: EvidenceHead | None, *,
                     head: bool, sync: bool, through: int | None) -> None:
        """Write ``lines`` (the records up to journal id ``through``, if any)."""
        assert last is not None
        _write_all(fd, bytes(lines))
        self._unsynced = True
        if through is not None:
            self._appended_through = through
        self._known_size = os.fstat(fd).st_size
        self._last = last
        head = head or self._lag() >= HEAD_EVERY_RECORDS
        if sync or head:
            self._sync(fd)
        if head:
            self._write_head(last)

    def _sync(self, fd: int) -> None:
        """fsync the chain: the head may then name any record written so far."""
        if self._unsynced:
            os.fsync(fd)
            self._unsynced = False
            self._synced_through = self._appended_through

    def _lag(self) -> int:
        """Records appended here since the head last moved (what this process knows of)."""
        if self._last is None:
            return 0
        return self._last.seq - (-1 if self._head is None else self._head.seq)

    def move_head(self) -> None:
        """Move the head to the last record this chain appended, if it lags (the chain is
        synced first)."""
        with self._lock:
            if self._last is None or self._last == self._head:
                return
            fd = os.open(self._path, os.O_RDWR | os.O_APPEND)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX)
                last = self._current_tail(fd)  # another writer may have moved on
                self._sync(fd)
                if last is not None and last != self._head:
                    self._write_head(last)
            finally:
                os.close(fd)

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

    def _last_records(self, count: int) -> list[dict[str, Any]]:
        """Up to ``count`` of the chain's last complete records (as far as they parse), from its
        last signed one back: the records after it are what is left of an append a crash cut
        short, which the next append cuts (``_drop_unfinished_append``)."""
        try:
            fd = os.open(self._path, os.O_RDONLY)
        except FileNotFoundError:
            return []
        try:
            records, end, signed = [], os.fstat(fd).st_size, False
            end = _last_newline_end(fd, end)  # a torn last line is no record
            while end > 0 and len(records) < count:
                start = _last_newline_end(fd, end - 1)
                try:
                    record = json.loads(os.pread(fd, end - start, start))
                except ValueError:
                    break
                end = start
                signed = signed or (isinstance(record, dict) and "signature" in record)
                if signed:
                    records.append(record)
            return records
        finally:
            os.close(fd)

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
                _check_item(kind, data)
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

    def _current_tail(self, fd: int) -> EvidenceHead | None:
        """The last record's seq and hash; re-read when another writer changed the file.

        Refuses to continue a chain that disagrees with its head: appending would move the head
        and hide a truncation or a rewritten tail for good. The head lags the chain by at most
        :data:`MAX_HEAD_LAG` records (a crash before the head moved), never more.
        """
        size = os.fstat(fd).st_size
        if size == self._known_size:
            return self._last
        size = _drop_unfinished_append(fd, size)
        last_line = _read_last_line(fd, size)
        last = None if last_line is None else _tail_record(last_line, self._path)
        try:
            head = read_head(self._head_path)
        except ValueError as error:
            raise EvidenceError(f"{self._head_path} is damaged ({error}); run `anet doctor`, then "
                                f"restore it from a backup or move {self._path.parent} away to "
                                "start a new chain") from None
        if head is None:
            consistent = last is None or last.seq == 0
        else:
            lag = -1 if last is None else last.seq - head["seq"]
            consistent = 0 <= lag <= MAX_HEAD_LAG and \
                _record_back(fd, size, lag, self._path) == EvidenceHead(head["seq"], head["hash"])
        if not consistent:
            raise EvidenceError(
                f"{self._path} ends at seq {None if last is None else last.seq}, which does not "
                f"follow {HEAD_FILE} (seq {None if head is None else head['seq']}): records were "
                f"removed or rewritten. Run `anet doctor`, then restore the chain from a backup or "
                f"move {self._path.parent} away to start a new chain")
        self._known_size, self._last = size, last
        return last

    def _write_head(self, head: EvidenceHead) -> None:
        signer = self._identity.signer()
        body = {"seq": head.seq, "hash": head.hash, "signer": signer.aid, "keySeq": signer.key_seq}
        signature = signer.sign(canonical_json(body), context=HEAD_CONTEXT)
        text = json.dumps(body | {"signature": b64u(signature)}) + "\n"
        write_atomic(self._head_path, text.encode(), mode=0o644, locked=True)  # under flock
        self._head = head


def _check_item(kind: str, data: object) -> None:
    check_kind(kind)
    if not isinstance(data, dict):
        raise TypeError(f"evidence data must be a JSON object, got {type(data).__name__}")


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


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _drop_unfinished_append(fd: int, size: int) -> int:
    """Cut what a crash mid-append left after the chain's last signed record: an incomplete
    last line, and the complete unsigned records before it, for which the lost last line would
    have vouched (an append signs its last record only). Nothing acknowledged is lost: the
    journal still holds such a record (``recover`` appends it again), and an append without a
    journal returned to nobody. Returns the new size."""
    end = size
    if end and os.pread(fd, 1, end - 1) != b"\n":
        end = _last_newline_end(fd, end)
    while end > 0:
        start = _last_newline_end(fd, end - 1)
        try:
            record = json.loads(os.pread(fd, end - start, start))
        except (ValueError, UnicodeDecodeError):
            break  # not a record: the head check below refuses the chain
        if not isinstance(record, dict) or "signature" in record:
            break
        end = start
    if end < size:
        os.ftruncate(fd, end)
        os.fsync(fd)
        log.warning("event=evidence-unfinished-append-cut bytes=%d", size - end)
    return end


def _last_newline_end(fd: int, size: int) -> int:
    """The offset just past the last newline before ``size`` (0 when there is none)."""
    end = size
    while end > 0:
        start = max(0, end - _TAIL_READ_BLOCK)
        block = os.pread(fd, end - start, start)
        index = block.rfind(b"\n")
        if index >= 0:
            return start + index + 1
        end = start
    return 0


def _read_last_line(fd: int, size: int) -> bytes | None:
    """The last complete line before ``size`` (which ends just past a newline), or None."""
    if size == 0:
        return None
    start = _last_newline_end(fd, size - 1)
    return os.pread(fd, size - start, start)


def _tail_record(line: bytes, path: Path) -> EvidenceHead:
    """The seq and hash of a record read back from the end of the chain."""
    try:
        record = json.loads(line)
        seq, record_digest = record["seq"], record["hash"]
        if not is_non_negative_int(seq) or not isinstance(record_digest, str):
            raise ValueError("bad seq or hash")
    except (ValueError, TypeError, KeyError, UnicodeDecodeError):
        raise EvidenceError(f"the last records of {path} are damaged; run `anet doctor`, then "
                            "restore the chain from a backup or move it away") from None
    return EvidenceHead(seq, record_digest)


def _record_back(fd: int, size: int, back: int, path: Path) -> EvidenceHead:
    """The seq and hash of the record ``back`` lines before the last one (0: the last)."""
    end = size
    for _ in range(back + 1):
        if end == 0:
            raise EvidenceError(f"{path} holds fewer records than its head says")
        start = _last_newline_end(fd, end - 1)
        line, end = os.pread(fd, end - start, start), start
    return _tail_record(line, path)


def read_head(path: Path) -> dict[str, Any] | None:
    """The raw ``head.json`` object, None when absent; ``ValueError`` when it is not a head."""
    try:
        head = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as error:
        raise ValueError(str(error)) from None
    if (not isinstance(head, dict) or not is_non_negative_int(head.get("seq"))
            or not isinstance(head.get("hash"), str)):
        raise ValueError("it lacks a seq and a hash")
    return head
