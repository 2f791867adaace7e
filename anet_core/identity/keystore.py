"""The private side of an identity: key files on disk, signing, and crash-safe key rotation.

Layout of the identity directory (mode 0700)::

    history.json             the key history, public; replacing it is the commit point of a rotation
    signing-<seq>.key        Ed25519 signing key of statement <seq>        (0600)
    encryption-<seq>.key     X25519 encryption key of statement <seq>      (0600)
    recovery-<seq>.key       Ed25519 recovery key of statement <seq>       (0600)

Each key file holds the raw 32-byte private key as base64url text. A rotation writes the new key
files first, under the new seq, then replaces ``history.json`` atomically, then deletes what is no
longer needed. A crash at any point leaves files that load: before the commit the old history still
names the old keys, which are all still there; after it the new history names the new keys, which
were written before it. Keys found under a seq the history does not reach (a rotation that crashed
before its commit) are ignored and overwritten by the next rotation.

Old encryption keys are kept for ``RETAINED_PREVIOUS_ENCRYPTION_KEYS`` rotations, so an envelope
sealed to a key that was current a moment ago still opens; old signing and recovery keys are
deleted.

One process owns an identity directory (the daemon); other processes may load it at any time.
"""

from __future__ import annotations

import json
import os
import re
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anet_core.identity.encoding import decode_b64u
from anet_core.identity.history import (
    HistoryError,
    KeyStatement,
    VerifiedHistory,
    build_statement,
    verify_history,
)
from anet_core.identity.keys import KEY_BYTES, EncryptionKey, SigningKey
from anet_core.identity.signatures import RAW_CONTEXT, RESERVED_CONTEXTS, sign_with_key
from anet_core.util.canonical import b64u
from anet_core.util.fsutil import write_atomic, write_private

HISTORY_FILE = "history.json"
RETAINED_PREVIOUS_ENCRYPTION_KEYS = 2
"""How many superseded encryption keys stay on disk (envelopes in flight or queued at a hub)."""

_LOAD_ATTEMPTS = 3
"""A reader racing a rotation may find the old history's key files just deleted; it reads again."""

_Key = SigningKey | EncryptionKey


class IdentityError(Exception):
    """The identity directory cannot be used. The message names the file and what to do; it never
    holds key material."""


@dataclass(frozen=True)
class Signer:
    """A snapshot of the current signing key: its signatures and its ``key_seq`` always belong
    together, even if the identity rotates meanwhile. Documents, envelopes and evidence use it."""

    aid: str
    key_seq: int
    _private_key: SigningKey = field(repr=False)

    def sign(self, data: bytes, *, context: str = RAW_CONTEXT) -> bytes:
        """Ed25519 signature of ``data`` under ``context`` (see ``signatures``)."""
        if context in RESERVED_CONTEXTS:
            raise ValueError(f"context {context!r} is reserved for key statements")
        return sign_with_key(self._private_key, context, data)

    def sign_jws(self, signing_input: bytes) -> bytes:
        """Ed25519 over a JWS signing input as RFC 8037 defines it, without an anet context.

        Still domain-separated: a signing input is base64url text joined by one ".", so it can
        never contain the NUL byte that ends every anet context prefix; anything else is refused.
        """
        if not _JWS_SIGNING_INPUT.fullmatch(signing_input):
            raise ValueError("a JWS signing input is two base64url segments joined by '.'")
        return self._private_key.sign(signing_input)


_JWS_SIGNING_INPUT = re.compile(rb"[A-Za-z0-9_-]+\.[A-Za-z0-9_-]*")


@dataclass(frozen=True)
class _KeyState:
    history: VerifiedHistory
    signing: SigningKey = field(repr=False)
    recovery: SigningKey = field(repr=False)
    encryption: tuple[EncryptionKey, ...] = field(repr=False)
    """Current first, then older ones still retained."""


class Identity:
    """This node's identity: its AID, its key history and its private keys."""

    def __init__(self, directory: Path, state: _KeyState) -> None:
        """Use ``create``, ``load`` or ``load_or_create``."""
        self._directory = directory
        self._state = state
        self._rotation_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"Identity(aid={self.aid!r}, key_seq={self.key_seq})"

    # -- construction ---------------------------------------------------------------------------

    @classmethod
    def create(cls, directory: Path) -> Identity:
        """Make a new identity in ``directory`` (``<data>/identity``); refuse if one exists."""
        directory = Path(directory)
        if (directory / HISTORY_FILE).exists():
            raise IdentityError(f"an identity already exists in {directory}; load it instead, or "
                                "move the directory away to start a new one")
        directory.mkdir(mode=0o700, parents=True, exist_ok=True)
        os.chmod(directory, 0o700)
        signing, encryption, recovery = (SigningKey.generate(), EncryptionKey.generate(),
                                         SigningKey.generate())
        genesis = build_statement(
            seq=0, kind="genesis", signing_key=signing.public,
            encryption_key=encryption.public, recovery_key=recovery.public, prev=None,
            created=int(time.time()), signer=signing, recovery_signer=recovery)
        _write_key_files(directory, 0, signing=signing, encryption=encryption, recovery=recovery)
        history = verify_history([genesis.to_dict()])
        _write_history(directory, history)
        return cls(directory, _KeyState(history, signing, recovery, (encryption,)))

    @classmethod
    def load(cls, directory: Path) -> Identity:
        """Load the identity in ``directory``; ``IdentityError`` says what is wrong and what to
        do."""
        directory = Path(directory)
        for attempt in range(_LOAD_ATTEMPTS):
            history = _read_history(directory)
            try:
                return cls(directory, _read_key_state(directory, history))
            except FileNotFoundError:
                if attempt == _LOAD_ATTEMPTS - 1 or _read_history(directory) == history:
                    raise IdentityError(
                        f"the key files of key seq {history.key_seq} are missing in {directory}; "
                        "restore them from a backup, or start a new identity") from None
        raise AssertionError("unreachable")

    @classmethod
    def load_or_create(cls, directory: Path) -> tuple[Identity, bool]:
        """Load the identity in ``directory``, or create one there; the flag says it was created."""
        if (Path(directory) / HISTORY_FILE).exists():
            return cls.load(directory), False
        return cls.create(directory), True

    # -- public view ----------------------------------------------------------------------------

    @property
    def directory(self) -> Path:
        return self._directory

    @property
    def aid(self) -> str:
        return self._state.history.aid

    @property
    def verified_history(self) -> VerifiedHistory:
        return self._state.history

    @property
    def history(self) -> list[dict[str, Any]]:
        """The key history in wire form (a fresh list: publish it, change it, it is yours)."""
        return self._state.history.to_list()

    @property
    def key_seq(self) -> int:
        return self._state.history.key_seq

    @property
    def signing_public_key(self) -> str:
        """Current Ed25519 public key, base64url."""
        return b64u(self._state.history.signing_key)

    @property
    def encryption_public_key(self) -> str:
        """Current X25519 public key, base64url: what peers seal envelopes to."""
        return b64u(self._state.history.encryption_key)

    # -- private operations ---------------------------------------------------------------------

    def signer(self) -> Signer:
        """The current signing key with its seq, fixed even if a rotation happens meanwhile."""
        state = self._state
        return Signer(state.history.aid, state.history.key_seq, state.signing)

    def sign(self, data: bytes, *, context: str = RAW_CONTEXT) -> bytes:
        """Sign ``data`` with the current signing key; pair with ``verify_signature``.

        ``context`` names the purpose (default: raw bytes such as a hub's challenge); a signature
        made here never verifies as a key statement, document, envelope or evidence record unless
        the same context is given to the verifier.
        """
        return self.signer().sign(data, context=context)

    def encryption_private_keys(self) -> tuple[EncryptionKey, ...]:
        """The current X25519 private key first, then the retained previous ones (newest first)."""
        return self._state.encryption

    def rotate(self, emergency: bool = False) -> VerifiedHistory:
        """Replace the signing and encryption keys; an emergency rotation also replaces the
        recovery key and is signed by the recovery key instead of the signing key. Returns the new
        history.

        Publish the new history (at the home hub) afterwards, so peers learn the new keys.
        """
        with self._rotation_lock:
            state = self._state
            previous = state.history.current
            signing, encryption = SigningKey.generate(), EncryptionKey.generate()
            recovery = SigningKey.generate() if emergency else state.recovery
            statement = build_statement(
                seq=previous.seq + 1, kind="emergency" if emergency else "rotate",
                signing_key=signing.public, encryption_key=encryption.public,
                recovery_key=recovery.public, prev=previous.hash,
                created=int(time.time()),
                signer=None if emergency else state.signing,
                recovery_signer=state.recovery if emergency else None)
            history = verify_history([*state.history.to_list(), statement.to_dict()],
                                     known=state.history)
            _write_key_files(self._directory, statement.seq, signing=signing,
                             encryption=encryption, recovery=recovery)
            _write_history(self._directory, history)  # the commit point
            retained = state.encryption[:RETAINED_PREVIOUS_ENCRYPTION_KEYS]
            self._state = _KeyState(history, signing, recovery, (encryption, *retained))
            _delete_superseded_key_files(self._directory, statement.seq)
            return history


def _key_path(directory: Path, role: str, seq: int) -> Path:
    return directory / f"{role}-{seq}.key"


def _write_key_files(directory: Path, seq: int, *, signing: SigningKey,
                     encryption: EncryptionKey, recovery: SigningKey) -> None:
    for role, key in (("signing", signing), ("encryption", encryption), ("recovery", recovery)):
        write_private(_key_path(directory, role, seq), b64u(key.raw) + "\n")


def _write_history(directory: Path, history: VerifiedHistory) -> None:
    text = json.dumps(history.to_list(), indent=2) + "\n"
    write_atomic(directory / HISTORY_FILE, text.encode(), mode=0o644)


def _read_history(directory: Path) -> VerifiedHistory:
    path = directory / HISTORY_FILE
    try:
        statements = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise IdentityError(f"no identity in {directory} ({HISTORY_FILE} is missing); "
                            "run `anet init` to create one") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as error:
        raise IdentityError(f"cannot read {path}: {error}; restore it from a backup") from None
    try:
        return verify_history(statements)
    except HistoryError as error:
        raise IdentityError(f"{path} does not verify ({error.reason}: {error}); "
                            "restore it from a backup") from None


def _read_key_state(directory: Path, history: VerifiedHistory) -> _KeyState:
    """Load the keys the history's current statement names; ``FileNotFoundError`` when absent."""
    current = history.current
    signing = _read_private_key(directory, "signing", current, SigningKey)
    recovery = _read_private_key(directory, "recovery", current, SigningKey)
    encryption = [_read_private_key(directory, "encryption", current, EncryptionKey)]
    for statement in reversed(history.statements[:-1][-RETAINED_PREVIOUS_ENCRYPTION_KEYS:]):
        try:
            encryption.append(_read_private_key(directory, "encryption", statement,
                                                EncryptionKey))
        except FileNotFoundError:
            break  # pruned: older ones are gone too
    return _KeyState(history, signing, recovery, tuple(encryption))


def _read_private_key(directory: Path, role: str, statement: KeyStatement,
                      key_type: type[_Key]) -> Any:
    path = _key_path(directory, role, statement.seq)
    mode = path.stat().st_mode  # FileNotFoundError propagates: the caller may retry
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise IdentityError(f"{path} is readable by other users (mode {stat.S_IMODE(mode):o}); "
                            f"run `chmod 600 {path}` and consider the key exposed")
    try:
        key = key_type(decode_b64u(path.read_text(encoding="ascii").strip(), what=f"{role} key",
                                   length=KEY_BYTES))
    except (ValueError, UnicodeDecodeError):
        raise IdentityError(f"{path} does not hold a {role} key; restore it from a backup"
                            ) from None
    expected = {"signing": statement.signing_key, "encryption": statement.encryption_key,
                "recovery": statement.recovery_key}[role]
    if key.public != expected:
        raise IdentityError(f"{path} does not match the {role} key of key seq {statement.seq} "
                            f"in {HISTORY_FILE}; restore the matching file from a backup")
    return key


def _delete_superseded_key_files(directory: Path, current_seq: int) -> None:
    """Delete signing and recovery keys of other seqs and encryption keys past retention.

    Runs after the commit; a crash here only leaves extra files, which the next rotation deletes.
    """
    oldest_kept_encryption = current_seq - RETAINED_PREVIOUS_ENCRYPTION_KEYS
    for path in directory.glob("*-*.key"):
        role, _, seq_text = path.stem.partition("-")
        if not seq_text.isdigit() or role not in ("signing", "encryption", "recovery"):
            continue
        seq = int(seq_text)
        keep = seq == current_seq or (role == "encryption"
                                      and oldest_kept_encryption <= seq < current_seq)
        if not keep:
            path.unlink(missing_ok=True)
