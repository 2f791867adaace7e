"""The evidence chain's files on disk: records appended to ``chain.jsonl`` under an exclusive
``flock``, its fsyncs, ``head.json`` written and read, and the end of the chain read back and
cut to its last signed record after a crash."""

from __future__ import annotations

import fcntl
import json
import logging
import os
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anet_core.evidence.format import MAX_RECORD_BYTES, EvidenceHead, Unsigned, check_item, lines
from anet_core.identity.keystore import Identity
from anet_core.util.canonical import b64u, canonical_json, is_non_negative_int
from anet_core.util.fsutil import write_atomic

log = logging.getLogger(__name__)

HEAD_FILE = "head.json"
HEAD_CONTEXT = "anet-evidence-head-v1"
_TAIL_READ_BLOCK = 64 * 1024
MAX_APPEND_RECORDS = 64
"""Most records one append writes (one fsync of the chain for all of them)."""
HEAD_EVERY_RECORDS = 32
"""Appends from the event loop (:meth:`EvidenceChain.record_all`) move the head once it lags
this many records, and whenever no record came for :data:`HEAD_IDLE_S`, and when the node
stops; the head then lags the chain by at most this plus one append."""
MAX_HEAD_LAG = HEAD_EVERY_RECORDS + MAX_APPEND_RECORDS
"""How far behind the chain a crash may leave the head (see ``_current_tail``)."""


class EvidenceError(Exception):
    """The chain cannot be appended to; the message says why and what to do."""


class ChainFile:
    """Appends hash-chained records to a chain file, the last record of each append signed.
    Thread-safe, and safe with other processes appending to the same file (an exclusive
    ``flock`` is held per append and the tail is re-read when the file changed)."""

    def __init__(self, path: Path, identity: Identity) -> None:
        self._path = Path(path)
        self._head_path = self._path.with_name(HEAD_FILE)
        self._identity = identity
        self._lock = threading.Lock()
        self._known_size: int | None = None
        self._last: EvidenceHead | None = None
        self._head: EvidenceHead | None = None
        """The head this chain wrote last."""
        self._unsynced = False
        """Records were written since the chain's last fsync."""
        self._appended_through = 0
        self._synced_through = 0
        """Journal ids: the last appended, the last on disk."""

    @property
    def path(self) -> Path:
        return self._path

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
                check_item(kind, data)
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
                written: list[Unsigned] = []
                for index, (kind, data) in enumerate(items):
                    if isinstance(outcomes[index], Exception):
                        continue
                    if written and headless:
                        self._write_lines(fd, lines(written, signer, outcomes), last, head=True,
                                          sync=True, through=None)
                        written, headless = [], False
                    try:
                        record = Unsigned.make(index, kind, data, last,
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
                    self._write_lines(fd, lines(written, signer, outcomes), last,
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
