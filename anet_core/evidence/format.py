"""The format of the evidence chain's records: what one record holds, its kind, its hash, its
line, and the lines of one append (the last record signed)."""

from __future__ import annotations

import hashlib
import re
import time
from dataclasses import dataclass
from functools import cache
from typing import Any

from anet_core.identity.keystore import Signer
from anet_core.identity.signatures import EVIDENCE_CONTEXT, SIGNATURE_BYTES
from anet_core.util.canonical import b64u, canonical_json, canonical_with

KIND_PATTERN = re.compile(r"\A[a-z][a-z0-9_-]*(?:\.[a-z][a-z0-9_-]*)+\Z")
"""Dotted lowercase, at least two segments. The first names who records it: ``task`` for the
core's task layer (``task.accepted``), else the module (``backends.forwarded``). Only the shape
is checked, so records written under earlier names still verify."""
MAX_KIND_LENGTH = 100
MAX_RECORD_BYTES = 256 * 1024
CHAINED_FIELDS = frozenset({"seq", "ts", "kind", "data", "prev", "hash"})
"""What every record holds; the last record of each append holds :data:`SIGNATURE_FIELDS` too."""
SIGNATURE_FIELDS = frozenset({"signer", "keySeq", "signature"})


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


def check_item(kind: str, data: object) -> None:
    check_kind(kind)
    if not isinstance(data, dict):
        raise TypeError(f"evidence data must be a JSON object, got {type(data).__name__}")


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
class Unsigned:
    """A record made for an append and not signed yet: the append signs its last record only
    (:func:`lines`), whose hash chains every record before it."""

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
             ts: int | None, signer: Signer, data_json: bytes | None = None) -> Unsigned:
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


def lines(records: list[Unsigned], signer: Signer,
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
