"""Key statements, and the verification of a key history from genesis to the current key.

A statement's *body* is every field but the signatures. Its hash (``statement_hash``) links the next
statement (``prev``) and, for the genesis statement, names the identity (the AID). Signatures cover
the canonical JSON of the body under the key-statement signature context (see ``signatures``):

========== ======================================= ==========================================
kind       ``signature`` by                          ``recoverySignature`` by
========== ======================================= ==========================================
genesis    its own signing key                       its own recovery key
rotate     the previous statement's signing key      (absent)
emergency  (absent)                                  the previous statement's recovery key
========== ======================================= ==========================================

A normal rotation keeps the recovery key: whoever steals only a signing key cannot lock the owner
out, because the owner's recovery key still authorises an emergency rotation on top of the thief's.
An emergency rotation replaces both the signing and the recovery key.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import pairwise
from typing import Any, Literal

from anet_core.errors import ReasonError
from anet_core.identity.aid import derive_aid
from anet_core.identity.encoding import decode_b64u
from anet_core.identity.keys import SigningKey
from anet_core.identity.signatures import (
    KEY_STATEMENT_CONTEXT,
    PUBLIC_KEY_BYTES,
    SIGNATURE_BYTES,
    sign_with_key,
    verify_with_key,
)
from anet_core.util.canonical import b64u, canonical_json, is_non_negative_int

StatementKind = Literal["genesis", "rotate", "emergency"]
STATEMENT_KINDS: tuple[StatementKind, ...] = ("genesis", "rotate", "emergency")
BODY_FIELDS = frozenset({"seq", "kind", "signingKey", "encryptionKey", "recoveryKey", "prev",
                         "created"})
SIGNATURE_FIELDS = frozenset({"signature", "recoverySignature"})
MAX_HISTORY_LENGTH = 1000
"""A history longer than this is refused as malformed: it bounds the work a peer can cause."""

HASH_BYTES = 32


class HistoryError(ReasonError, ValueError):
    """A key history that must not be trusted. ``reason`` is a short machine word:

    malformed, forged, reordered, replayed, truncated, forked, wrong-aid.
    """


def statement_hash(body: dict[str, Any]) -> str:
    """base64url SHA-256 of a statement body's canonical JSON (what ``prev`` holds)."""
    return b64u(hashlib.sha256(canonical_json(body)).digest())


@dataclass(frozen=True)
class KeyStatement:
    """One parsed, well-formed statement. Verified only as part of a ``VerifiedHistory``."""

    seq: int
    kind: StatementKind
    signing_key: bytes
    encryption_key: bytes
    recovery_key: bytes
    prev: str | None
    created: int
    signature: bytes | None
    recovery_signature: bytes | None

    def body(self) -> dict[str, Any]:
        """The signed part, in wire form."""
        return {
            "seq": self.seq,
            "kind": self.kind,
            "signingKey": b64u(self.signing_key),
            "encryptionKey": b64u(self.encryption_key),
            "recoveryKey": b64u(self.recovery_key),
            "prev": self.prev,
            "created": self.created,
        }

    @property
    def hash(self) -> str:
        return statement_hash(self.body())

    def to_dict(self) -> dict[str, Any]:
        """The statement in wire form, signatures included."""
        wire = self.body()
        if self.signature is not None:
            wire["signature"] = b64u(self.signature)
        if self.recovery_signature is not None:
            wire["recoverySignature"] = b64u(self.recovery_signature)
        return wire

    @classmethod
    def from_dict(cls, raw: object, *, position: int) -> KeyStatement:
        """Parse the wire form strictly; raise ``HistoryError("malformed")`` on any deviation."""
        if not isinstance(raw, dict):
            raise HistoryError("malformed", f"statement #{position} is not a JSON object")
        missing = BODY_FIELDS - raw.keys()
        unknown = raw.keys() - BODY_FIELDS - SIGNATURE_FIELDS
        if missing or unknown:
            raise HistoryError("malformed", f"statement #{position} lacks {sorted(missing)} "
                                            f"or has unknown fields {sorted(unknown)}")
        try:
            seq = _non_negative_int(raw["seq"], "seq")
            created = _non_negative_int(raw["created"], "created")
            kind = raw["kind"]
            if kind not in STATEMENT_KINDS:
                raise ValueError(f"kind {kind!r} is not one of {', '.join(STATEMENT_KINDS)}")
            prev = raw["prev"]
            if prev is not None:
                decode_b64u(prev, what="prev", length=HASH_BYTES)
            keys = [decode_b64u(raw[name], what=name, length=PUBLIC_KEY_BYTES)
                    for name in ("signingKey", "encryptionKey", "recoveryKey")]
            signatures = [decode_b64u(raw[name], what=name, length=SIGNATURE_BYTES)
                          if name in raw else None
                          for name in ("signature", "recoverySignature")]
        except ValueError as error:
            raise HistoryError("malformed", f"statement #{position}: {error}") from None
        if (kind == "genesis") != (seq == 0) or (prev is None) != (seq == 0):
            raise HistoryError("malformed", f"statement #{position}: only seq 0 is a genesis "
                                            "statement, and only it has no prev")
        return cls(seq=seq, kind=kind, signing_key=keys[0], encryption_key=keys[1],
                   recovery_key=keys[2], prev=prev, created=created,
                   signature=signatures[0], recovery_signature=signatures[1])


def _non_negative_int(value: object, name: str) -> int:
    if not isinstance(value, int) or not is_non_negative_int(value):
        raise ValueError(f"{name} must be a non-negative integer, got {value!r}")
    return value


def build_statement(*, seq: int, kind: StatementKind, signing_key: bytes, encryption_key: bytes,
                    recovery_key: bytes, prev: str | None, created: int,
                    signer: SigningKey | None,
                    recovery_signer: SigningKey | None) -> KeyStatement:
    """Make a signed statement; ``signer`` and ``recovery_signer`` as the module docstring says."""
    unsigned = KeyStatement(seq=seq, kind=kind, signing_key=signing_key,
                            encryption_key=encryption_key, recovery_key=recovery_key, prev=prev,
                            created=created, signature=None, recovery_signature=None)
    body = canonical_json(unsigned.body())
    return replace(
        unsigned,
        signature=sign_with_key(signer, KEY_STATEMENT_CONTEXT, body) if signer else None,
        recovery_signature=(sign_with_key(recovery_signer, KEY_STATEMENT_CONTEXT, body)
                            if recovery_signer else None))


@dataclass(frozen=True)
class VerifiedHistory:
    """A key history whose every link and signature was checked; made by ``verify_history``."""

    aid: str
    statements: tuple[KeyStatement, ...]

    @property
    def current(self) -> KeyStatement:
        return self.statements[-1]

    @property
    def key_seq(self) -> int:
        return self.current.seq

    @property
    def signing_key(self) -> bytes:
        """The current raw Ed25519 public signing key."""
        return self.current.signing_key

    @property
    def encryption_key(self) -> bytes:
        """The current raw X25519 public key: seal envelopes to this one."""
        return self.current.encryption_key

    def signing_key_at(self, seq: int) -> bytes:
        """The raw public signing key of statement ``seq``; ``LookupError`` when there is none."""
        if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq < len(self.statements):
            raise LookupError(f"key seq {seq!r} is not in the history of {self.aid} "
                              f"(0..{self.key_seq})")
        return self.statements[seq].signing_key

    def is_revoked(self, seq: int) -> bool:
        """True when an emergency rotation came after statement ``seq``.

        An emergency rotation says the node was compromised; any older signing key may be in a
        thief's hands, so signatures by it prove nothing any more, whenever they claim to be from.
        """
        return any(statement.kind == "emergency" for statement in self.statements[seq + 1:])

    def to_list(self) -> list[dict[str, Any]]:
        """The history in wire form (what ``history.json`` and the hub directory hold)."""
        return [statement.to_dict() for statement in self.statements]

    def extends(self, older: VerifiedHistory) -> bool:
        """True when ``older`` is this history or a prefix of it (same AID, no fork)."""
        return (self.aid == older.aid and len(self.statements) >= len(older.statements)
                and all(mine.hash == theirs.hash
                        for mine, theirs in zip(self.statements, older.statements,
                                                strict=False)))


def verify_history(statements: Sequence[object], *, expected_aid: str | None = None,
                   min_seq: int = 0, known: VerifiedHistory | None = None) -> VerifiedHistory:
    """Check a key history from genesis to the current statement; ``HistoryError`` if untrusted.

    ``expected_aid``: the AID the caller is looking for (``wrong-aid`` otherwise). ``min_seq``: the
    highest key seq the caller has already seen for this AID (``truncated`` when the history stops
    before it). ``known``: a history verified earlier; the new one must extend it (``forked`` when
    it diverges) — this also implies ``expected_aid`` and ``min_seq``.
    """
    if (not isinstance(statements, Sequence) or isinstance(statements, str | bytes)
            or not statements):
        raise HistoryError("malformed", "a key history must be a non-empty list of statements")
    if len(statements) > MAX_HISTORY_LENGTH:
        raise HistoryError("malformed", f"a key history of {len(statements)} statements is longer "
                                        f"than the limit of {MAX_HISTORY_LENGTH}")
    parsed = [KeyStatement.from_dict(raw, position=index) for index, raw in enumerate(statements)]

    seen_hashes: set[str] = set()
    for statement in parsed:
        if statement.hash in seen_hashes:
            raise HistoryError("replayed", f"statement seq {statement.seq} appears twice in the "
                                           "history")
        seen_hashes.add(statement.hash)
    for index, statement in enumerate(parsed):
        if statement.seq != index:
            raise HistoryError("reordered", f"statement #{index} has seq {statement.seq}; "
                                            "seqs must run 0, 1, 2, … without gaps")

    genesis = parsed[0]
    aid = derive_aid(genesis.body())
    if expected_aid is not None and aid != expected_aid:
        raise HistoryError("wrong-aid", f"the history's genesis statement names {aid}, "
                                        f"not the expected {expected_aid}")
    _check_signatures(genesis, signer=genesis.signing_key, recovery_signer=genesis.recovery_key)
    for previous, statement in pairwise(parsed):
        _check_link(previous, statement)

    history = VerifiedHistory(aid=aid, statements=tuple(parsed))
    if history.key_seq < min_seq:
        raise HistoryError("truncated", f"the history of {aid} ends at key seq {history.key_seq}, "
                                        f"but key seq {min_seq} was seen before")
    if known is not None:
        _check_extends(history, known)
    return history


def _check_link(previous: KeyStatement, statement: KeyStatement) -> None:
    if statement.prev != previous.hash:
        raise HistoryError("reordered", f"statement seq {statement.seq} does not follow "
                                        f"statement seq {previous.seq} (prev hash differs)")
    if statement.kind == "rotate":
        if statement.recovery_key != previous.recovery_key:
            raise HistoryError("forged", f"statement seq {statement.seq} is a normal rotation "
                                         "that replaces the recovery key; only an emergency "
                                         "rotation may")
        _check_signatures(statement, signer=previous.signing_key, recovery_signer=None)
    else:  # emergency
        if (statement.recovery_key == previous.recovery_key
                or statement.signing_key == previous.signing_key):
            raise HistoryError("malformed", f"emergency statement seq {statement.seq} must replace "
                                            "both the signing key and the recovery key")
        _check_signatures(statement, signer=None, recovery_signer=previous.recovery_key)


def _check_signatures(statement: KeyStatement, *, signer: bytes | None,
                      recovery_signer: bytes | None) -> None:
    """Demand exactly the signatures the statement's kind calls for, each by the right key.

    Missing or wrong required signatures are checked first, so a statement signed by the wrong
    kind of key reads as forged rather than as carrying an extra field.
    """
    body = canonical_json(statement.body())
    checks = (("signature", signer, statement.signature),
              ("recoverySignature", recovery_signer, statement.recovery_signature))
    for field, key, signature in checks:
        if key is not None and (
                signature is None
                or not verify_with_key(key, KEY_STATEMENT_CONTEXT, body, signature)):
            raise HistoryError("forged", f"the {field} of {statement.kind} statement seq "
                                         f"{statement.seq} is missing or not made by the key that "
                                         "must sign it")
    for field, key, signature in checks:
        if key is None and signature is not None:
            raise HistoryError("malformed", f"a {statement.kind} statement (seq {statement.seq}) "
                                            f"carries no {field}")


def _check_extends(history: VerifiedHistory, known: VerifiedHistory) -> None:
    if history.aid != known.aid:
        raise HistoryError("wrong-aid", f"the history names {history.aid}, not {known.aid}")
    if history.key_seq < known.key_seq:
        raise HistoryError("truncated", f"the history of {history.aid} ends at key seq "
                                        f"{history.key_seq}, before the known key seq "
                                        f"{known.key_seq}")
    if not history.extends(known):
        raise HistoryError("forked", f"the history of {history.aid} diverges from the one known "
                                     "before; it must only add statements after the known ones")

