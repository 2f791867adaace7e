"""Sealed envelopes: round trips, and every way an envelope is refused."""

from __future__ import annotations

import copy
import json
import os
import time
from pathlib import Path
from typing import Any

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from hypothesis import given, settings
from hypothesis import strategies as st

from anet_core.identity import Identity, Signer
from anet_core.identity.keys import SigningKey
from anet_core.identity.signatures import ENVELOPE_CONTEXT
from anet_core.protocol import envelope as envelope_module
from anet_core.protocol.envelope import (
    DEFAULT_MAX_AGE_S,
    MAX_CIPHERTEXT_BYTES,
    MAX_FUTURE_SKEW_S,
    EnvelopeError,
    OpenKeys,
    SealKeys,
    open_envelope,
    peek_header,
    seal,
)
from anet_core.util.canonical import b64u, canonical_json, canonical_with, unb64u

BODY = {"kind": "message", "parts": [{"text": "bonjour"}], "n": 2**53 + 1}


@pytest.fixture(scope="module")
def alice(tmp_path_factory: pytest.TempPathFactory) -> Identity:
    return Identity.create(tmp_path_factory.mktemp("alice") / "identity")


@pytest.fixture(scope="module")
def bob(tmp_path_factory: pytest.TempPathFactory) -> Identity:
    return Identity.create(tmp_path_factory.mktemp("bob") / "identity")


@pytest.fixture(scope="module")
def carol(tmp_path_factory: pytest.TempPathFactory) -> Identity:
    return Identity.create(tmp_path_factory.mktemp("carol") / "identity")


def to(recipient: Identity, sender: Identity, body: dict[str, Any] = BODY, **kwargs: Any) -> dict:
    return seal(sender, recipient.aid, recipient.encryption_public_key, body, **kwargs)


def reason_of(envelope: Any, recipient: Identity, sender: Identity, **kwargs: Any) -> str:
    with pytest.raises(EnvelopeError) as caught:
        open_envelope(envelope, recipient, sender.verified_history, **kwargs)
    assert str(caught.value)
    return caught.value.reason


def seal_raw(inner: dict[str, Any] | bytes, *, sender_aid: str, recipient: Identity,
             envelope_id: str | None = None) -> dict[str, Any]:
    """Seal an arbitrary payload exactly as docs/protocol.md describes: an independent
    implementation (OpenSSL's, through ``cryptography``, where anet uses libsodium), so these
    tests also check the documented construction."""
    envelope_id = envelope_id or b64u(os.urandom(16))
    recipient_key = unb64u(recipient.encryption_public_key)
    ephemeral = X25519PrivateKey.generate()
    epk = ephemeral.public_key().public_bytes_raw()
    key = HKDF(algorithm=hashes.SHA256(), length=32, salt=epk + recipient_key,
               info=b"anet-envelope-v1").derive(
        ephemeral.exchange(X25519PublicKey.from_public_bytes(recipient_key)))
    nonce = os.urandom(12)
    header = {"v": 1, "id": envelope_id, "from": sender_aid, "to": recipient.aid,
              "epk": b64u(epk), "nonce": b64u(nonce)}
    plaintext = inner if isinstance(inner, bytes) else canonical_json(inner)
    return header | {"ct": b64u(ChaCha20Poly1305(key).encrypt(nonce, plaintext,
                                                             canonical_json(header)))}


def signed_inner(signer: Signer, recipient: Identity, envelope_id: str, *, ts: int | None = None,
                 body: dict[str, Any] = BODY) -> dict[str, Any]:
    inner = {"from": signer.aid, "to": recipient.aid, "id": envelope_id,
             "ts": int(time.time() * 1000) if ts is None else ts, "keySeq": signer.key_seq,
             "body": body}
    return inner | {"signature": b64u(signer.sign(canonical_json(inner), context=ENVELOPE_CONTEXT))}


class ImpostorSender:
    """Claims Alice's AID but signs with a key of its own."""

    def __init__(self, aid: str, key_seq: int = 0) -> None:
        self.aid = aid
        self._signer = Signer(aid, key_seq, SigningKey.generate())

    def signer(self) -> Signer:
        return self._signer


# -- round trips ---------------------------------------------------------------------------------

def test_round_trip(alice: Identity, bob: Identity) -> None:
    envelope = to(bob, alice)
    assert envelope.keys() == {"v", "id", "from", "to", "epk", "nonce", "ct"}
    assert (envelope["v"], envelope["from"], envelope["to"]) == (1, alice.aid, bob.aid)
    opened = open_envelope(envelope, bob, alice.verified_history)
    assert (opened.id, opened.sender, opened.recipient, opened.key_seq) == (
        envelope["id"], alice.aid, bob.aid, alice.key_seq)
    assert opened.body == BODY and abs(opened.ts - time.time() * 1000) < 60_000


def test_documented_construction_interoperates(alice: Identity, bob: Identity) -> None:
    envelope_id = b64u(os.urandom(16))
    envelope = seal_raw(signed_inner(alice.signer(), bob, envelope_id), sender_aid=alice.aid,
                        recipient=bob, envelope_id=envelope_id)
    assert open_envelope(envelope, bob, alice.verified_history).body == BODY


def test_ids_are_unique(alice: Identity, bob: Identity) -> None:
    assert len({to(bob, alice)["id"] for _ in range(50)}) == 50


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text()
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children,
                                                                     max_size=4),
    max_leaves=25)


@settings(max_examples=60, deadline=None)
@given(body=st.dictionaries(st.text(max_size=10), json_values, max_size=6))
def test_any_json_body_round_trips(alice: Identity, bob: Identity, body: dict[str, Any]) -> None:
    assert open_envelope(to(bob, alice, body), bob, alice.verified_history).body == body


@settings(max_examples=60, deadline=None)
@given(body=st.dictionaries(st.text(max_size=10), json_values, max_size=6))
def test_a_value_encoded_once_gives_the_canonical_bytes(body: dict[str, Any]) -> None:
    fields = {"from": "a" * 32, "id": "x-é", "keySeq": 3, "signature": "s", "to": "b", "ts": 1}
    assert canonical_with("body", canonical_json(body), fields) == \
        canonical_json(fields | {"body": body})
    assert canonical_with("body", canonical_json(body), {}) == canonical_json({"body": body})


def test_sealed_to_the_pre_rotation_key_still_opens(tmp_path: Path, alice: Identity) -> None:
    recipient = Identity.create(tmp_path / "identity")
    in_flight = [to(recipient, alice)]
    for _ in range(2):
        recipient.rotate()
        in_flight.append(to(recipient, alice))
    reloaded = Identity.load(recipient.directory)
    for holder in (recipient, reloaded):
        opened = [open_envelope(envelope, holder, alice.verified_history) for envelope in in_flight]
        assert [envelope.body for envelope in opened] == [BODY] * 3
    recipient.rotate()  # the first key is now past retention
    assert reason_of(in_flight[0], recipient, alice) == "tampered"
    assert open_envelope(in_flight[1], recipient, alice.verified_history).body == BODY


def test_sender_rotation_after_sealing(tmp_path: Path, bob: Identity) -> None:
    sender = Identity.create(tmp_path / "identity")
    envelope = to(bob, sender)
    sender.rotate()
    assert open_envelope(envelope, bob, sender.verified_history).key_seq == 0


def test_sender_emergency_rotation_revokes_in_flight_envelopes(tmp_path: Path,
                                                                bob: Identity) -> None:
    sender = Identity.create(tmp_path / "identity")
    envelope = to(bob, sender)
    sender.rotate(emergency=True)
    assert reason_of(envelope, bob, sender) == "unknown-key"


# -- peek_header ---------------------------------------------------------------------------------

def test_peek_header(alice: Identity, bob: Identity) -> None:
    envelope = to(bob, alice)
    header = peek_header(envelope)
    assert (header.id, header.sender, header.recipient) == (envelope["id"], alice.aid, bob.aid)
    assert "ciphertext" not in repr(header)


def malformed_variants() -> list[tuple[str, Any]]:
    sender = "a" * 32
    base = {"v": 1, "id": b64u(b"i" * 16), "from": sender, "to": "b" * 32,
            "epk": b64u(b"k" * 32), "nonce": b64u(b"n" * 12), "ct": b64u(b"c" * 40)}
    cases: list[tuple[str, Any]] = [("not an object", [base]), ("none", None)]
    for name, change in [
        ("missing field", {"ct": KeyError}), ("extra field", {"note": "x"}),
        ("version 2", {"v": 2}), ("version true", {"v": True}), ("version 1.0", {"v": 1.0}),
        ("version text", {"v": "1"}), ("bad from", {"from": "Alice"}),
        ("bad to", {"to": "b" * 31}), ("aid with newline", {"to": "b" * 32 + "\n"}),
        ("short id", {"id": b64u(b"i" * 15)}), ("padded id", {"id": b64u(b"i" * 16) + "=="}),
        ("short epk", {"epk": b64u(b"k" * 31)}), ("long nonce", {"nonce": b64u(b"n" * 13)}),
        ("standard base64", {"ct": "ab+/" * 10}), ("ct below tag size", {"ct": b64u(b"c" * 15)}),
        ("ct too big", {"ct": "A" * (MAX_CIPHERTEXT_BYTES * 4 // 3 + 8)}),
        ("non-canonical base64", {"id": b64u(b"i" * 16)[:-1] + "R"}),
        ("number id", {"id": 7}),
    ]:
        envelope = copy.deepcopy(base)
        for field, value in change.items():
            if value is KeyError:
                del envelope[field]
            else:
                envelope[field] = value
        cases.append((name, envelope))
    return cases


@pytest.mark.parametrize(("name", "envelope"), malformed_variants(),
                         ids=[name for name, _ in malformed_variants()])
def test_peek_header_refuses_malformed(name: str, envelope: Any) -> None:
    with pytest.raises(EnvelopeError) as caught:
        peek_header(envelope)
    assert caught.value.reason == "malformed"


# -- tampering -----------------------------------------------------------------------------------

def other_value(field: str, value: str) -> str:
    size = {"id": 16, "epk": 32, "nonce": 12}.get(field)
    if size is not None:
        return b64u(os.urandom(size))
    raw = bytearray(unb64u(value))
    raw[len(raw) // 2] ^= 0x01
    return b64u(bytes(raw))


@pytest.mark.parametrize("field", ["id", "epk", "nonce", "ct"])
def test_tampered_field(alice: Identity, bob: Identity, field: str) -> None:
    envelope = to(bob, alice)
    envelope[field] = other_value(field, envelope[field])
    assert reason_of(envelope, bob, alice) == "tampered"


def test_tampered_sender(alice: Identity, bob: Identity, carol: Identity) -> None:
    """A relay that rewrites "from" makes the recipient fetch the wrong history: the open fails."""
    envelope = to(bob, alice) | {"from": carol.aid}
    assert reason_of(envelope, bob, carol) == "tampered"


def test_tampered_recipient_is_misaddressed(alice: Identity, bob: Identity,
                                            carol: Identity) -> None:
    assert reason_of(to(bob, alice) | {"to": carol.aid}, bob, alice) == "misaddressed"


@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_any_ciphertext_bit_flip_is_tampered(alice: Identity, bob: Identity,
                                             data: st.DataObject) -> None:
    envelope = to(bob, alice, {"x": 1})
    raw = bytearray(unb64u(envelope["ct"]))
    bit = data.draw(st.integers(0, len(raw) * 8 - 1))
    raw[bit // 8] ^= 1 << (bit % 8)
    assert reason_of(envelope | {"ct": b64u(bytes(raw))}, bob, alice) == "tampered"


def test_truncated_ciphertext_is_tampered(alice: Identity, bob: Identity) -> None:
    envelope = to(bob, alice)
    envelope["ct"] = b64u(unb64u(envelope["ct"])[:-1])
    assert reason_of(envelope, bob, alice) == "tampered"


def test_low_order_epk_is_tampered(alice: Identity, bob: Identity) -> None:
    assert reason_of(to(bob, alice) | {"epk": b64u(bytes(32))}, bob, alice) == "tampered"


def test_rewrapped_payload_is_tampered(alice: Identity, bob: Identity, carol: Identity) -> None:
    """Bob forwards Alice's signed payload to Carol, or re-sends it under a fresh id."""
    envelope_id = b64u(os.urandom(16))
    for_bob = signed_inner(alice.signer(), bob, envelope_id)
    to_carol = seal_raw(for_bob, sender_aid=alice.aid, recipient=carol, envelope_id=envelope_id)
    assert reason_of(to_carol, carol, alice) == "tampered"
    fresh_id = seal_raw(for_bob, sender_aid=alice.aid, recipient=bob)
    assert reason_of(fresh_id, bob, alice) == "tampered"


# -- addressing, keys, signatures ---------------------------------------------------------------

def test_wrong_recipient_is_misaddressed(alice: Identity, bob: Identity, carol: Identity) -> None:
    assert reason_of(to(bob, alice), carol, alice) == "misaddressed"


def test_history_of_someone_else_is_unknown_key(alice: Identity, bob: Identity,
                                                carol: Identity) -> None:
    assert reason_of(to(bob, alice), bob, carol) == "unknown-key"


def test_signature_by_a_wrong_key(alice: Identity, bob: Identity) -> None:
    envelope = seal(ImpostorSender(alice.aid), bob.aid, bob.encryption_public_key, BODY)  # type: ignore[arg-type]
    assert reason_of(envelope, bob, alice) == "bad-signature"


def test_a_plaintext_that_is_not_canonical_json_does_not_verify(alice: Identity,
                                                                 bob: Identity) -> None:
    """The signature covers the canonical payload, and the receiver takes the signed bytes from
    the plaintext as sealed (docs/protocol.md: ``plaintext = canonical_json(inner payload)``):
    the same signed payload in other JSON (spaced, keys in another order) is refused."""
    envelope_id = b64u(os.urandom(16))
    inner = signed_inner(alice.signer(), bob, envelope_id)
    for plaintext in (json.dumps(inner, sort_keys=True).encode(),
                      json.dumps(dict(reversed(inner.items())), separators=(",", ":")).encode()):
        envelope = seal_raw(plaintext, sender_aid=alice.aid, recipient=bob,
                            envelope_id=envelope_id)
        assert reason_of(envelope, bob, alice) == "bad-signature"
    canonical = seal_raw(inner, sender_aid=alice.aid, recipient=bob, envelope_id=envelope_id)
    assert open_envelope(canonical, bob, alice.verified_history).body == BODY


def test_key_seq_beyond_the_history(alice: Identity, bob: Identity) -> None:
    envelope = seal(ImpostorSender(alice.aid, key_seq=5), bob.aid, bob.encryption_public_key, BODY)  # type: ignore[arg-type]
    assert reason_of(envelope, bob, alice) == "unknown-key"


@pytest.mark.parametrize(("name", "inner"), [
    ("not json", b"\xff not json"),
    ("nan", b'{"x": NaN}'),
    ("list", b"[]"),
    ("missing field", {"from": "a" * 32}),
])
def test_malformed_payload(alice: Identity, bob: Identity, name: str, inner: Any) -> None:
    envelope = seal_raw(inner, sender_aid=alice.aid, recipient=bob)
    assert reason_of(envelope, bob, alice) == "malformed"


def test_payload_with_bad_types_is_malformed(alice: Identity, bob: Identity) -> None:
    envelope_id = b64u(os.urandom(16))
    inner = signed_inner(alice.signer(), bob, envelope_id) | {"ts": "now"}
    envelope = seal_raw(inner, sender_aid=alice.aid, recipient=bob, envelope_id=envelope_id)
    assert reason_of(envelope, bob, alice) == "malformed"


# -- clock ---------------------------------------------------------------------------------------

def test_expired(alice: Identity, bob: Identity) -> None:
    sealed_at = 1_700_000_000.0
    envelope = to(bob, alice, now=sealed_at)
    assert open_envelope(envelope, bob, alice.verified_history,
                         now=sealed_at + DEFAULT_MAX_AGE_S - 1).body == BODY
    assert reason_of(envelope, bob, alice, now=sealed_at + DEFAULT_MAX_AGE_S + 1) == "expired"
    assert reason_of(envelope, bob, alice, now=sealed_at + 61, max_age_s=60) == "expired"


def test_from_the_future(alice: Identity, bob: Identity) -> None:
    sealed_at = 1_700_000_000.0
    envelope = to(bob, alice, now=sealed_at)
    assert open_envelope(envelope, bob, alice.verified_history,
                         now=sealed_at - MAX_FUTURE_SKEW_S + 1).body == BODY
    assert reason_of(envelope, bob, alice, now=sealed_at - MAX_FUTURE_SKEW_S - 1) == "from-future"


# -- sealing errors ------------------------------------------------------------------------------

def test_seal_refuses_bad_arguments(alice: Identity, bob: Identity) -> None:
    with pytest.raises(ValueError, match="not an AID"):
        seal(alice, "bob", bob.encryption_public_key, BODY)
    with pytest.raises(ValueError, match="32 bytes"):
        seal(alice, bob.aid, b"short", BODY)
    with pytest.raises(ValueError, match="low-order"):
        seal(alice, bob.aid, bytes(32), BODY)
    with pytest.raises(TypeError):
        seal(alice, bob.aid, bob.encryption_public_key, ["not", "an", "object"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="limit"):
        seal(alice, bob.aid, bob.encryption_public_key, {"blob": "x" * MAX_CIPHERTEXT_BYTES})


def test_seal_accepts_raw_key_bytes(alice: Identity, bob: Identity) -> None:
    envelope = seal(alice, bob.aid, unb64u(bob.encryption_public_key), BODY)
    assert open_envelope(envelope, bob, alice.verified_history).body == BODY


# -- one ephemeral key for a batch of envelopes --------------------------------------------------

@pytest.fixture
def made(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The recipient key of every seal key made, in order."""
    keys: list[bytes] = []
    real = envelope_module.seal_key

    def recorded(recipient_key: bytes) -> envelope_module.SealKey:
        made_key = real(recipient_key)
        keys.append(recipient_key)
        return made_key

    monkeypatch.setattr(envelope_module, "seal_key", recorded)
    return keys


@pytest.fixture
def exchanges(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The public key of every X25519 exchange's other party, in order."""
    parties: list[bytes] = []
    real = envelope_module.EncryptionKey.exchange

    def recorded(self: envelope_module.EncryptionKey, public: bytes) -> bytes:
        parties.append(bytes(public))
        return real(self, public)

    monkeypatch.setattr(envelope_module.EncryptionKey, "exchange", recorded)
    return parties


def test_one_ephemeral_key_seals_a_batch_of_envelopes(alice: Identity, bob: Identity,
                                                       made: list[bytes],
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(SealKeys, "MAX_USES", 3)
    keys = SealKeys()
    sealed = [to(bob, alice, keys=keys) for _ in range(4)]
    assert made == [unb64u(bob.encryption_public_key)] * 2  # the fourth needed a new key
    assert len({envelope["epk"] for envelope in sealed[:3]}) == 1
    assert sealed[3]["epk"] != sealed[0]["epk"]
    assert len({envelope["nonce"] for envelope in sealed}) == 4
    for envelope in sealed:
        assert open_envelope(envelope, bob, alice.verified_history).body == BODY


def test_an_ephemeral_key_serves_for_max_age_s(alice: Identity, bob: Identity,
                                              made: list[bytes]) -> None:
    keys = SealKeys()
    recipient = unb64u(bob.encryption_public_key)
    first = keys.take(recipient)
    assert keys.take(recipient) is first and len(made) == 1
    first.made_at -= SealKeys.MAX_AGE_S  # made a minute ago
    assert keys.take(recipient) is not first and len(made) == 2


def test_seal_keys_are_kept_for_the_latest_recipients_only(made: list[bytes]) -> None:
    keys = SealKeys()
    recipients = [os.urandom(32) for _ in range(SealKeys.MAX_RECIPIENTS + 1)]
    for recipient in recipients:
        keys.take(recipient)
    count = len(made)
    keys.take(recipients[-1])
    assert len(made) == count
    keys.take(recipients[0])  # the longest unused was dropped
    assert len(made) == count + 1


def test_no_seal_key_for_a_low_order_point(alice: Identity, bob: Identity,
                                           made: list[bytes]) -> None:
    keys = SealKeys()
    for _ in range(2):  # nothing is kept: that recipient's seals keep failing with their reason
        with pytest.raises(ValueError, match="low-order"):
            seal(alice, bob.aid, bytes(32), BODY, keys=keys)


def test_the_key_of_an_epk_opened_once_opens_the_next_envelopes(
        alice: Identity, bob: Identity, exchanges: list[bytes]) -> None:
    sealing = SealKeys()
    sealed = [to(bob, alice, keys=sealing) for _ in range(3)]
    epk = unb64u(sealed[0]["epk"])
    opening = OpenKeys()
    before = len(exchanges)
    for envelope in sealed:
        assert open_envelope(envelope, bob, alice.verified_history, keys=opening).body == BODY
    assert exchanges[before:] == [epk]  # the first envelope's only
    for envelope in sealed:  # without the kept keys, one exchange per envelope
        open_envelope(envelope, bob, alice.verified_history)
    assert exchanges[before + 1:] == [epk] * 3


def test_a_kept_key_opens_no_tampered_envelope(alice: Identity, bob: Identity) -> None:
    sealing, opening = SealKeys(), OpenKeys()
    first, second = to(bob, alice, keys=sealing), to(bob, alice, keys=sealing)
    open_envelope(first, bob, alice.verified_history, keys=opening)
    ciphertext = bytearray(unb64u(second["ct"]))
    ciphertext[0] ^= 1
    assert reason_of(second | {"ct": b64u(bytes(ciphertext))}, bob, alice,
                     keys=opening) == "tampered"
    assert reason_of(first | {"nonce": second["nonce"]}, bob, alice, keys=opening) == "tampered"


def test_open_keys_are_kept_for_the_latest_epks_only() -> None:
    keys = OpenKeys()
    own = os.urandom(32)
    epks = [os.urandom(32) for _ in range(OpenKeys.MAX_KEYS + 1)]
    for epk in epks:
        keys.keep(epk, own, epk[::-1])
    assert keys.get(epks[0], own) is None  # the longest unused was dropped
    assert keys.get(epks[-1], own) == epks[-1][::-1]
    assert keys.get(epks[-1], os.urandom(32)) is None  # kept for this node's own key only
