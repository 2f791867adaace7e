"""Sealed envelopes: end-to-end encrypted, sender-signed messages that hubs relay without reading.

Outer envelope (what a hub sees)::

    {"v": 1, "id": <16 random bytes>, "from": <sender AID>, "to": <recipient AID>,
     "epk": <ephemeral X25519 public key>, "nonce": <12 bytes>, "ct": <ciphertext + 16-byte tag>}

Binary fields are unpadded base64url. The key is ``HKDF-SHA256(X25519(ephemeral, recipient key),
salt = epk || recipient key, info = "anet-envelope-v1")``; the cipher is ChaCha20-Poly1305 with the
canonical JSON of the outer header (every field but ``ct``) as associated data, so no header field
can change without the open failing. One ephemeral key serves a batch of envelopes to one
recipient (:class:`SealKeys`), each with its own random nonce; the recipient keeps the key it
derived for an ``epk`` (:class:`OpenKeys`). The plaintext is the canonical JSON of the inner
payload::

    {"from", "to", "id", "ts" (unix ms), "keySeq", "body", "signature"}

where ``signature`` is the sender's Ed25519 signature (envelope context) over the canonical JSON of
the payload without ``signature``. The inner ``from``/``to``/``id`` must repeat the header's: a
signed payload cannot be re-wrapped for another recipient or under another id.

Replay detection is the caller's job: the store keeps the ids of opened envelopes for at least
``DEFAULT_MAX_AGE_S + MAX_FUTURE_SKEW_S`` and drops repeats; older envelopes fail as expired.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any

from anet_core.errors import ReasonError
from anet_core.identity.aid import check_aid, is_aid
from anet_core.identity.encoding import check_b64u, decode_b64u, decode_checked_b64u
from anet_core.identity.history import VerifiedHistory
from anet_core.identity.keys import (
    AEAD_TAG_BYTES,
    KEY_BYTES,
    DecryptionError,
    EncryptionKey,
    aead_decrypt,
    aead_encrypt,
    hkdf_sha256,
)
from anet_core.identity.keystore import Identity
from anet_core.identity.signatures import ENVELOPE_CONTEXT, SIGNATURE_BYTES, verify_with_key
from anet_core.util.canonical import b64u, canonical_json, canonical_with, is_non_negative_int
from anet_core.util.strictjson import parse_json

ENVELOPE_VERSION = 1
ENVELOPE_FIELDS = frozenset({"v", "id", "from", "to", "epk", "nonce", "ct"})
INNER_FIELDS = frozenset({"from", "to", "id", "ts", "keySeq", "body", "signature"})
ENVELOPE_ID_BYTES = 16
NONCE_BYTES = 12
X25519_KEY_BYTES = KEY_BYTES
MAX_CIPHERTEXT_BYTES = 128 * 1024 * 1024
"""The protocol's ceiling on a ciphertext: a 96 MiB A2A request body sealed whole fits. Hubs
enforce a lower per-node limit of their own (16 MiB by default) and say so when they refuse."""
HKDF_INFO = b"anet-envelope-v1"

DEFAULT_MAX_AGE_S = 7 * 24 * 3600
"""An envelope older than this is refused (expired); a hub must not queue envelopes for longer."""
MAX_FUTURE_SKEW_S = 300
"""An envelope stamped further ahead than this (sender clock fast) is refused (from-future)."""


class EnvelopeError(ReasonError, ValueError):
    """An envelope that must not be delivered. ``reason``: malformed, tampered, misaddressed,
    bad-signature, unknown-key, expired or from-future."""


@dataclass(frozen=True)
class EnvelopeHeader:
    """The outer envelope, checked for shape without any key (what a hub routes by)."""

    id: str
    sender: str
    recipient: str
    epk: bytes = field(repr=False)
    nonce: bytes = field(repr=False)
    ciphertext: bytes = field(repr=False)

    def associated_data(self) -> bytes:
        """The canonical JSON of every outer field but ``ct``: what the AEAD authenticates."""
        return _associated_data(self.id, self.sender, self.recipient, self.epk, self.nonce)


@dataclass(frozen=True)
class OpenedEnvelope:
    """A decrypted envelope whose sender signature verified. ``ts`` is unix milliseconds."""

    id: str
    sender: str
    recipient: str
    key_seq: int
    ts: int
    body: dict[str, Any]


@dataclass(slots=True)
class SealKey:
    """An ephemeral X25519 key's public half and the key it derives with one recipient's
    encryption key: what a seal needs that does not depend on the envelope. The ephemeral
    private half is gone once the key is derived. It serves up to
    :data:`SealKeys.MAX_USES` envelopes to that recipient key within :data:`SealKeys.MAX_AGE_S`
    (see :class:`SealKeys`)."""

    epk: bytes
    key: bytes = field(repr=False)
    made_at: float
    """``time.monotonic()`` when it was made."""
    uses: int = 0


def seal_key(recipient_key: bytes) -> SealKey:
    """A new :class:`SealKey` for ``recipient_key`` (32 raw bytes)."""
    ephemeral = EncryptionKey.generate()
    epk = ephemeral.public
    try:
        shared = ephemeral.exchange(recipient_key)
    except ValueError:
        raise ValueError("the recipient encryption key is not a usable X25519 key "
                         "(a low-order point); refresh the recipient's key history") from None
    return SealKey(epk, _derive_key(shared, epk, recipient_key), time.monotonic())


class SealKeys:
    """The seal keys in use, one per recipient encryption key: an ephemeral key serves up to
    :data:`MAX_USES` envelopes to one recipient key within :data:`MAX_AGE_S`, each with a fresh
    random nonce, then a new one is made (docs/protocol.md, "Cryptography"). Its X25519
    operations and key derivation, two thirds of a seal's work, are then paid once per batch of
    envelopes instead of once per envelope, and the recipient, which keeps the key it derived
    for an ``epk`` (:class:`OpenKeys`), once per batch too. Keys live in memory only; at most
    :data:`MAX_RECIPIENTS` recipients keep one, the longest unused is dropped first."""

    MAX_RECIPIENTS = 64
    MAX_USES = 256
    """Envelopes per ephemeral key: with random 96-bit nonces, the chance that two of them
    share a nonce is below 2**-80."""
    MAX_AGE_S = 60.0

    def __init__(self) -> None:
        self._keys: dict[bytes, SealKey] = {}  # the most recently used last

    def take(self, recipient_key: bytes) -> SealKey:
        """The key for the next envelope to ``recipient_key``: the one in use while it may
        serve, else a new one."""
        key = self._keys.pop(recipient_key, None)
        if key is None or key.uses >= self.MAX_USES or \
                time.monotonic() - key.made_at >= self.MAX_AGE_S:
            key = seal_key(recipient_key)
        key.uses += 1
        self._keys[recipient_key] = key
        if len(self._keys) > self.MAX_RECIPIENTS:
            del self._keys[next(iter(self._keys))]
        return key


class OpenKeys:
    """The keys this node derived for the ``epk`` of envelopes it opened, by ``epk`` and its own
    encryption key, so that the next envelope sealed with the same ephemeral key (see
    :class:`SealKeys`) opens without an X25519 operation. At most :data:`MAX_KEYS` are kept,
    the longest unused is dropped first; a key is kept only once an envelope decrypted with it,
    so an ``epk`` nobody sealed with takes no room."""

    MAX_KEYS = 256

    def __init__(self) -> None:
        self._keys: dict[tuple[bytes, bytes], bytes] = {}  # the most recently used last

    def get(self, epk: bytes, own_key: bytes) -> bytes | None:
        key = self._keys.pop((epk, own_key), None)
        if key is not None:
            self._keys[(epk, own_key)] = key
        return key

    def keep(self, epk: bytes, own_key: bytes, key: bytes) -> None:
        self._keys[(epk, own_key)] = key
        if len(self._keys) > self.MAX_KEYS:
            del self._keys[next(iter(self._keys))]


def seal(sender: Identity, recipient_aid: str, recipient_encryption_key: bytes | str,
         body: dict[str, Any], *, now: float | None = None,
         keys: SealKeys | None = None) -> dict[str, Any]:
    """Encrypt ``body`` to the recipient's encryption key, signed by the sender's current key;
    ``keys``: take the seal's key from there (see :class:`SealKeys`), else make a new one."""
    check_aid(recipient_aid)
    if isinstance(recipient_encryption_key, str):
        recipient_key = decode_b64u(recipient_encryption_key, what="recipient encryption key",
                                    length=X25519_KEY_BYTES)
    else:
        recipient_key = bytes(recipient_encryption_key)
    if len(recipient_key) != X25519_KEY_BYTES:
        raise ValueError(f"the recipient encryption key must be {X25519_KEY_BYTES} bytes, "
                         f"got {len(recipient_key)}")
    if not isinstance(body, dict):
        raise TypeError(f"an envelope body must be a JSON object, got {type(body).__name__}")
    signer = sender.signer()
    envelope_id = b64u(os.urandom(ENVELOPE_ID_BYTES))
    inner = {"from": signer.aid, "to": recipient_aid, "id": envelope_id,
             "ts": int((time.time() if now is None else now) * 1000), "keySeq": signer.key_seq}
    body_json = canonical_json(body)
    # ``body`` sorts before every other key of the inner envelope: the body is encoded once.
    signature = signer.sign(canonical_with("body", body_json, inner), context=ENVELOPE_CONTEXT)
    plaintext = canonical_with("body", body_json, inner | {"signature": b64u(signature)})
    if len(plaintext) + AEAD_TAG_BYTES > MAX_CIPHERTEXT_BYTES:
        raise ValueError(f"the envelope body is {len(plaintext)} bytes sealed; the limit is "
                         f"{MAX_CIPHERTEXT_BYTES - AEAD_TAG_BYTES}; send large content by "
                         "reference")

    key = seal_key(recipient_key) if keys is None else keys.take(recipient_key)
    nonce = os.urandom(NONCE_BYTES)
    ciphertext = aead_encrypt(
        key.key, nonce, plaintext,
        _associated_data(envelope_id, signer.aid, recipient_aid, key.epk, nonce))
    return {"v": ENVELOPE_VERSION, "id": envelope_id, "from": signer.aid, "to": recipient_aid,
            "epk": b64u(key.epk), "nonce": b64u(nonce), "ct": b64u(ciphertext)}


@dataclass(frozen=True, slots=True)
class EnvelopeRoute:
    """Who an envelope is from and for, and its id: what a hub needs of it."""

    id: str
    sender: str
    recipient: str


def check_envelope(envelope: object) -> EnvelopeRoute:
    """Check the outer shape (fields, version, sizes, base64url, AIDs) without a key and without
    decoding anything.

    Raises ``EnvelopeError("malformed")``; a hub refuses such envelopes instead of relaying them.
    """
    if not isinstance(envelope, dict):
        raise EnvelopeError("malformed", f"an envelope must be a JSON object, "
                                         f"got {type(envelope).__name__}")
    if envelope.keys() != ENVELOPE_FIELDS:
        raise EnvelopeError("malformed", f"an envelope has exactly the fields "
                                         f"{sorted(ENVELOPE_FIELDS)}; got {sorted(envelope)}")
    version = envelope["v"]
    if type(version) is not int or version != ENVELOPE_VERSION:  # not True, not 1.0
        raise EnvelopeError("malformed", f"envelope version {version!r} is not supported "
                                         f"(only {ENVELOPE_VERSION})")
    for name in ("from", "to"):
        if not is_aid(envelope[name]):
            raise EnvelopeError("malformed", f"envelope field {name!r} is not an AID: "
                                             f"{str(envelope[name])[:80]!r}")
    try:
        check_b64u(envelope["id"], what="id", length=ENVELOPE_ID_BYTES)
        check_b64u(envelope["epk"], what="epk", length=X25519_KEY_BYTES)
        check_b64u(envelope["nonce"], what="nonce", length=NONCE_BYTES)
        ciphertext = check_b64u(envelope["ct"], what="ct", max_length=MAX_CIPHERTEXT_BYTES)
    except ValueError as error:
        raise EnvelopeError("malformed", f"envelope {error}") from None
    if ciphertext < AEAD_TAG_BYTES:
        raise EnvelopeError("malformed", "envelope ct is shorter than an authentication tag")
    return EnvelopeRoute(id=envelope["id"], sender=envelope["from"], recipient=envelope["to"])


def envelope_text(envelope: dict[str, Any]) -> str:
    """The JSON text of an envelope that :func:`check_envelope` accepted. Its values are the
    version and base64url and base32 text, so nothing needs escaping."""
    return (f'{{"v":{ENVELOPE_VERSION},"id":"{envelope["id"]}","from":"{envelope["from"]}",'
            f'"to":"{envelope["to"]}","epk":"{envelope["epk"]}","nonce":"{envelope["nonce"]}",'
            f'"ct":"{envelope["ct"]}"}}')


def peek_header(envelope: object) -> EnvelopeHeader:
    """The outer envelope as :func:`check_envelope` checks it, its binary fields decoded.

    Raises ``EnvelopeError("malformed")``.
    """
    route = check_envelope(envelope)
    assert isinstance(envelope, dict)  # checked
    return EnvelopeHeader(id=route.id, sender=route.sender, recipient=route.recipient,
                          epk=decode_checked_b64u(envelope["epk"]),
                          nonce=decode_checked_b64u(envelope["nonce"]),
                          ciphertext=decode_checked_b64u(envelope["ct"]))


def open_envelope(envelope: object, recipient: Identity, sender_history: VerifiedHistory, *,
                  now: float | None = None, max_age_s: float = DEFAULT_MAX_AGE_S,
                  keys: OpenKeys | None = None) -> OpenedEnvelope:
    """Decrypt and verify an envelope to ``recipient`` from the owner of ``sender_history``;
    ``keys``: the keys derived for earlier envelopes (:class:`OpenKeys`), kept there too.

    Does not detect replays: check ``OpenedEnvelope.id`` against the ids already seen.
    """
    return open_peeked(peek_header(envelope), recipient, sender_history, now=now,
                       max_age_s=max_age_s, keys=keys)


def open_peeked(header: EnvelopeHeader, recipient: Identity, sender_history: VerifiedHistory,
                *, now: float | None = None, max_age_s: float = DEFAULT_MAX_AGE_S,
                keys: OpenKeys | None = None) -> OpenedEnvelope:
    """:func:`open_envelope` of the envelope whose :func:`peek_header` is ``header``."""
    if header.recipient != recipient.aid:
        raise EnvelopeError("misaddressed", f"the envelope is addressed to {header.recipient}, "
                                            f"not to this node ({recipient.aid})")
    if header.sender != sender_history.aid:
        raise EnvelopeError("unknown-key", f"the envelope is from {header.sender}, but the key "
                                           f"history given is that of {sender_history.aid}")
    plaintext = _decrypt(header, recipient, keys)
    inner = _parse_inner(plaintext)
    for name, outer in (("from", header.sender), ("to", header.recipient), ("id", header.id)):
        if inner[name] != outer:
            raise EnvelopeError("tampered", f"the signed payload's {name!r} differs from the "
                                            "envelope's: it was re-wrapped")
    key_seq = inner["keySeq"]
    try:
        public_key = sender_history.signing_key_at(key_seq)
    except LookupError as error:
        raise EnvelopeError("unknown-key", f"{error}; refresh the sender's key history") from None
    if sender_history.is_revoked(key_seq):
        raise EnvelopeError("unknown-key", f"key seq {key_seq} of {header.sender} was revoked "
                                           "by an emergency rotation")
    signature = decode_b64u(inner["signature"], what="signature", length=SIGNATURE_BYTES)
    if not verify_with_key(public_key, ENVELOPE_CONTEXT, _signed_part(plaintext, inner),
                           signature):
        raise EnvelopeError("bad-signature", f"the payload signature does not verify with key "
                                             f"seq {key_seq} of {header.sender}")
    now_ms = int((time.time() if now is None else now) * 1000)
    ts = inner["ts"]
    if now_ms - ts > max_age_s * 1000:
        raise EnvelopeError("expired", f"the envelope was sealed {(now_ms - ts) // 1000} s ago; "
                                       f"the limit is {max_age_s:g} s")
    if ts - now_ms > MAX_FUTURE_SKEW_S * 1000:
        raise EnvelopeError("from-future", f"the envelope is stamped {(ts - now_ms) // 1000} s in "
                                           f"the future (limit {MAX_FUTURE_SKEW_S} s); "
                                           "a clock is wrong")
    return OpenedEnvelope(id=header.id, sender=header.sender, recipient=header.recipient,
                          key_seq=key_seq, ts=ts, body=inner["body"])


def _signed_part(plaintext: bytes, inner: dict[str, Any]) -> bytes:
    """What the sender signed: the plaintext, canonical JSON of the payload, without its
    ``signature`` member (no need to encode the body again). Canonical keys put that member
    after ``body``, followed only by ``to`` and ``ts``, which cannot hold it; a plaintext that is
    not canonical yields bytes that no canonical signature verifies."""
    member = b',"signature":"' + inner["signature"].encode() + b'"'
    start = plaintext.rfind(member)
    return plaintext if start < 0 else plaintext[:start] + plaintext[start + len(member):]


def _associated_data(envelope_id: str, sender: str, recipient: str, epk: bytes,
                     nonce: bytes) -> bytes:
    return canonical_json({"v": ENVELOPE_VERSION, "id": envelope_id, "from": sender,
                           "to": recipient, "epk": b64u(epk), "nonce": b64u(nonce)})


def _derive_key(shared: bytes, epk: bytes, recipient_key: bytes) -> bytes:
    return hkdf_sha256(shared, salt=epk + recipient_key, info=HKDF_INFO)


def _decrypt(header: EnvelopeHeader, recipient: Identity, keys: OpenKeys | None) -> bytes:
    """Try the current and the retained previous encryption keys (the header does not say which),
    each with the key derived for this ``epk`` before when ``keys`` holds it."""
    associated_data = header.associated_data()
    for private_key in recipient.encryption_private_keys():
        key = None if keys is None else keys.get(header.epk, private_key.public)
        if key is None:
            try:
                shared = private_key.exchange(header.epk)
            except ValueError:  # low-order epk: no key, so nothing can be authentic
                break
            key = _derive_key(shared, header.epk, private_key.public)
        try:
            plaintext = aead_decrypt(key, header.nonce, header.ciphertext, associated_data)
        except DecryptionError:
            continue
        if keys is not None:
            keys.keep(header.epk, private_key.public, key)
        return plaintext
    raise EnvelopeError("tampered", "the envelope does not decrypt with this node's keys: it was "
                                    "changed in transit or sealed to a key this node does not hold")


def _parse_inner(plaintext: bytes) -> dict[str, Any]:
    try:
        inner = parse_json(plaintext)
    except ValueError as error:
        raise EnvelopeError("malformed", f"the sealed payload is not JSON: {error}") from None
    if not isinstance(inner, dict) or inner.keys() != INNER_FIELDS:
        raise EnvelopeError("malformed", f"the sealed payload must have exactly the fields "
                                         f"{sorted(INNER_FIELDS)}")
    problems = [name for name, ok in (
        ("ts", is_non_negative_int(inner["ts"])),
        ("keySeq", is_non_negative_int(inner["keySeq"])),
        ("body", isinstance(inner["body"], dict)),
        ("signature", isinstance(inner["signature"], str)),
    ) if not ok]
    if problems:
        raise EnvelopeError("malformed", f"the sealed payload has invalid {', '.join(problems)}")
    try:
        decode_b64u(inner["signature"], what="signature", length=SIGNATURE_BYTES)
    except ValueError as error:
        raise EnvelopeError("malformed", f"the sealed payload's {error}") from None
    return inner
