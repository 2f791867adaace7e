"""Reading the evidence chain: every record checked against the node's key history, their
order, and the head (read-only)."""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anet_core.evidence.file import HEAD_CONTEXT, HEAD_FILE, read_head
from anet_core.evidence.format import CHAINED_FIELDS, SIGNATURE_FIELDS, EvidenceHead, record_hash
from anet_core.identity.encoding import decode_b64u
from anet_core.identity.history import VerifiedHistory
from anet_core.identity.signatures import EVIDENCE_CONTEXT, SIGNATURE_BYTES, verify_with_key
from anet_core.util.canonical import canonical_json, is_non_negative_int


@dataclass(frozen=True)
class EvidenceIssue:
    """One finding of ``verify``. ``reason``: malformed, changed, inserted, removed, reordered,
    truncated, torn-tail, unsigned-tail, head-mismatch or no-head. ``line`` is 1-based when the
    issue has one."""

    reason: str
    detail: str
    seq: int | None = None
    line: int | None = None


@dataclass(frozen=True)
class EvidenceReport:
    """The outcome of ``verify``: ``ok`` when there are no issues."""

    records: int
    last: EvidenceHead | None
    issues: tuple[EvidenceIssue, ...]

    @property
    def ok(self) -> bool:
        return not self.issues


def verify(path: Path, history: VerifiedHistory, *,
           checkpoint: EvidenceHead | None = None) -> EvidenceReport:
    """Check every record of the chain at ``path`` and its order, against its ``head.json`` and an
    optional ``checkpoint`` the caller kept elsewhere; report every finding (read-only)."""
    issues: list[EvidenceIssue] = []
    valid: list[tuple[int, dict[str, Any]]] = []
    unverified: list[tuple[int, dict[str, Any], str]] = []
    count = 0
    for line_number, line in _lines(Path(path), issues):
        count += 1
        record, problem = _check_record(line, history)
        if record is None:
            issues.append(EvidenceIssue("malformed", problem, line=line_number))
        elif problem:
            unverified.append((line_number, record, problem))
        else:
            valid.append((line_number, record))

    by_seq = _check_order(valid, unverified, issues)
    in_order = [(by_seq[seq], "") for seq in sorted(by_seq)]
    vouched = [record for (record, _), voucher in zip(in_order, _vouchers(in_order), strict=True)
               if voucher is not None]
    last = EvidenceHead(vouched[-1]["seq"], vouched[-1]["hash"]) if vouched else None
    # Records after every signed one (unvouched records before one are explained by the
    # finding that broke their link to it):
    top_signed = max((record["seq"] for record in (*by_seq.values(),
                                                    *(found for _, found, _ in unverified))
                      if "signature" in record), default=-1)
    unsigned = [seq for seq in by_seq if seq > top_signed]
    if unsigned:
        issues.append(EvidenceIssue(
            "unsigned-tail", f"records seq {min(unsigned)} to {max(unsigned)} are not signed and "
            "no signed record follows them: what a crash left of an append (or records written "
            "without the node's key); they prove nothing, and the next append cuts them",
            seq=min(unsigned)))

    head_path = Path(path).with_name(HEAD_FILE)
    head = _verified_head(head_path, history, issues)
    if head is None and count >= 2 and not head_path.exists():
        # The head is written after every append, so only the newest record may lack it.
        issues.append(EvidenceIssue("no-head", f"{HEAD_FILE} is missing beside {count} records"))
    for name, mark in ((HEAD_FILE, head), ("the checkpoint", checkpoint)):
        if mark is None:
            continue
        if last is None or mark.seq > last.seq:
            ends_at = None if last is None else last.seq
            issues.append(EvidenceIssue("truncated", f"{name} records seq {mark.seq}, the chain "
                                        f"ends at {ends_at}", seq=mark.seq))
        elif mark.seq in by_seq and by_seq[mark.seq]["hash"] != mark.hash:
            issues.append(EvidenceIssue("head-mismatch", f"record seq {mark.seq} differs from the "
                                        f"one {name} recorded", seq=mark.seq))
    return EvidenceReport(records=count, last=last, issues=tuple(issues))


@dataclass(frozen=True)
class ReadRecord:
    """A record as ``anet evidence list`` shows it: ``problem`` is "" when it verifies;
    ``signed_in``: the seq of the record whose signature vouches for it (its own when it is
    signed, else the last of its append)."""

    record: dict[str, Any]
    problem: str
    signed_in: int | None = None

    @property
    def task_id(self) -> str | None:
        value = self.record["data"].get("taskId")
        return value if isinstance(value, str) else None

    def as_dict(self) -> dict[str, Any]:
        return self.record | {"verified": not self.problem, "problem": self.problem,
                              "signedIn": self.signed_in}


@dataclass(frozen=True)
class ChainSegment:
    """The records of a chain from a byte offset on (:func:`read_segment`)."""

    records: list[ReadRecord]
    end: int
    """The offset after the last signed record read, which vouches for those before it: where
    a later read of the records appended since starts. Records after it may still be cut (the
    next append cuts records no signature vouches for), never those before."""
    last: EvidenceHead | None
    """The record at :attr:`end` (None when none was read): the next read must continue it."""


def read_records(path: Path, history: VerifiedHistory, *, kind: str | None = None,
                 task: str | None = None) -> list[ReadRecord]:
    """The well-formed records of the chain at ``path``, in file order, each checked against
    ``history``; ``kind`` keeps one kind (``task.*`` a family), ``task`` one task's records.
    Read-only; :func:`verify` is what judges the chain as a whole (order, gaps, head)."""
    segment = read_segment(path, history, kind=kind, task=task)
    assert segment is not None  # from the start, the chain continues nothing
    return segment.records


def read_segment(path: Path, history: VerifiedHistory, *, start: int = 0,
                 after: EvidenceHead | None = None, kind: str | None = None,
                 task: str | None = None) -> ChainSegment | None:
    """The records appended after ``after``, the record that ends at byte ``start`` (the
    :attr:`ChainSegment.end` and :attr:`ChainSegment.last` of an earlier read), read and
    checked as :func:`read_records` reads the whole chain; None when the chain does not
    continue ``after`` there (it was cut or rewritten since: read it from the start)."""
    path = Path(path)
    checked: list[tuple[dict[str, Any], str, int]] = []
    offset = start
    for _, line in _lines(path, [], start=start):
        offset += len(line)
        record, problem = _check_record(line, history)
        if record is not None:
            checked.append((record, problem, offset))
    if after is not None:
        size = path.stat().st_size if path.exists() else 0
        first = checked[0][0] if checked else None
        if size < start or (first is not None and (first["seq"], first["prev"])
                            != (after.seq + 1, after.hash)):
            return None
    found, end, last = [], start, after
    vouchers = _vouchers([(record, problem) for record, problem, _ in checked])
    for (record, problem, ends_at), voucher in zip(checked, vouchers, strict=True):
        if not problem and voucher is None:
            problem = (f"record seq {record['seq']} is not signed and no signed record after it "
                       "vouches for it")
        if not problem and voucher == record["seq"]:
            end, last = ends_at, EvidenceHead(record["seq"], record["hash"])
        read = ReadRecord(record, problem, voucher)
        if kind is not None and not _kind_matches(record["kind"], kind):
            continue
        if task is not None and read.task_id != task:
            continue
        found.append(read)
    return ChainSegment(found, end, last)


def _vouchers(records: Sequence[tuple[dict[str, Any], str]]) -> list[int | None]:
    """Per record, in chain order with its problem ("" when it verifies alone), the seq of the
    signed record that vouches for it: its own when it is signed, else that of the record right
    after it (seq + 1, linking to it by ``prev``) when one vouches for that. None: nothing signed
    does (a record with a problem neither vouches nor is vouched for)."""
    vouchers: list[int | None] = [None] * len(records)
    voucher: int | None = None  # that of the record after the current one
    for index in range(len(records) - 1, -1, -1):
        record, problem = records[index]
        if problem:
            voucher = None
        elif "signature" in record:
            voucher = record["seq"]
        elif voucher is not None:
            after = records[index + 1][0]
            if after["seq"] != record["seq"] + 1 or after["prev"] != record["hash"]:
                voucher = None
        vouchers[index] = voucher
    return vouchers


def _kind_matches(kind: str, wanted: str) -> bool:
    if wanted.endswith(".*"):
        return kind.startswith(wanted[:-1])
    return kind == wanted


def _check_record(line: bytes, history: VerifiedHistory) -> tuple[dict[str, Any] | None, str]:
    """(record, "") when valid, (record, problem) when well-formed but unverified,
    (None, problem) when malformed."""
    try:
        record = json.loads(line)
    except (ValueError, UnicodeDecodeError) as error:
        return None, f"not JSON: {error}"
    if not isinstance(record, dict) or record.keys() not in (CHAINED_FIELDS,
                                                              CHAINED_FIELDS | SIGNATURE_FIELDS):
        return None, (f"a record has exactly the fields {sorted(CHAINED_FIELDS)}, and the last "
                      f"of an append {sorted(SIGNATURE_FIELDS)} too")
    seq, ts, key_seq = record["seq"], record["ts"], record.get("keySeq", 0)
    if not all(is_non_negative_int(value) for value in (seq, ts, key_seq)):
        return None, "seq, ts and keySeq must be non-negative integers"
    if not isinstance(record["data"], dict) or not isinstance(record["kind"], str):
        return None, "kind must be text and data an object"
    try:
        expected_hash = record_hash(seq, ts, record["kind"], record["data"], record["prev"])
        signature = None if "signature" not in record else decode_b64u(
            record["signature"], what="signature", length=SIGNATURE_BYTES)
    except (TypeError, ValueError) as error:
        return None, str(error)
    if record["hash"] != expected_hash:
        return record, f"record seq {seq} does not match its hash: its content was changed"
    if signature is None:
        return record, ""  # vouched for by the signed record of its append (_vouchers)
    if record["signer"] != history.aid:
        return record, f"record seq {seq} is signed by {record['signer']!r}, not {history.aid}"
    try:
        public_key = history.signing_key_at(key_seq)
    except LookupError as error:
        return record, f"record seq {seq}: {error}"
    signed = canonical_json({name: value for name, value in record.items() if name != "signature"})
    if not verify_with_key(public_key, EVIDENCE_CONTEXT, signed, signature):
        return record, f"record seq {seq} has a signature that does not verify"
    return record, ""


def _check_order(valid: list[tuple[int, dict[str, Any]]],
                 unverified: list[tuple[int, dict[str, Any], str]],
                 issues: list[EvidenceIssue]) -> dict[int, dict[str, Any]]:
    """Classify records that do not verify, then find duplicated, out-of-order, missing and
    unlinked records among those that do. Returns the verified records by seq."""
    by_seq: dict[int, dict[str, Any]] = {}
    highest_so_far = -1
    for line_number, record in valid:
        seq = record["seq"]
        if seq in by_seq:
            issues.append(EvidenceIssue("inserted", f"a second record with seq {seq}",
                                        seq=seq, line=line_number))
            continue
        if seq < highest_so_far:
            issues.append(EvidenceIssue("reordered", f"record seq {seq} comes after seq "
                                        f"{highest_so_far}", seq=seq, line=line_number))
        by_seq[seq] = record
        highest_so_far = max(highest_so_far, seq)
    for line_number, record, problem in unverified:
        seq = record["seq"]
        if seq in by_seq:  # a forged record beside the genuine one
            issues.append(EvidenceIssue("inserted", f"{problem}, beside the genuine record seq "
                                        f"{seq}", seq=seq, line=line_number))
        else:
            issues.append(EvidenceIssue("changed", problem, seq=seq, line=line_number))
    # A changed record still accounts for its seq: report it once, as changed, not also as removed.
    accounted = by_seq.keys() | {record["seq"] for _, record, _ in unverified}
    for seq in range(max(accounted, default=-1) + 1):
        if seq not in accounted:
            issues.append(EvidenceIssue("removed", f"record seq {seq} is missing", seq=seq))
    for seq, record in by_seq.items():
        predecessor = by_seq.get(seq - 1)
        if seq == 0:
            expected_prev = None
        elif predecessor is not None:
            expected_prev = predecessor["hash"]
        else:
            continue  # the predecessor is missing: reported as removed
        if record["prev"] != expected_prev:
            issues.append(EvidenceIssue("changed", f"record seq {seq} does not link to record "
                                        f"seq {seq - 1}", seq=seq))
    return by_seq


def _lines(path: Path, issues: list[EvidenceIssue], *,
           start: int = 0) -> Iterator[tuple[int, bytes]]:
    """The complete lines of the file from byte ``start`` on (numbered from there)."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return
    with handle:
        handle.seek(start)
        for line_number, line in enumerate(handle, start=1):
            if not line.endswith(b"\n"):
                issues.append(EvidenceIssue("torn-tail", "the last line is incomplete (a crash "
                                            "during an append); it is discarded on the next append",
                                            line=line_number))
                return
            yield line_number, line


def _verified_head(path: Path, history: VerifiedHistory,
                   issues: list[EvidenceIssue]) -> EvidenceHead | None:
    """The head when ``head.json`` exists and is signed by ``history``'s identity."""
    try:
        head = read_head(path)
    except ValueError as error:
        issues.append(EvidenceIssue("head-mismatch", f"{path.name} is unreadable: {error}"))
        return None
    if head is None:
        return None
    body = {name: head.get(name) for name in ("seq", "hash", "signer", "keySeq")}
    try:
        valid = (head.keys() == body.keys() | {"signature"} and head["signer"] == history.aid
                 and verify_with_key(history.signing_key_at(head["keySeq"]), HEAD_CONTEXT,
                                     canonical_json(body),
                                     decode_b64u(head["signature"], what="signature",
                                                 length=SIGNATURE_BYTES)))
    except (LookupError, ValueError):
        valid = False
    if not valid:
        issues.append(EvidenceIssue("head-mismatch", f"{path.name} is not signed by {history.aid}",
                                    seq=head["seq"]))
        return None
    return EvidenceHead(head["seq"], head["hash"])
