"""Signed documents: cards, receipts, reviews, operator lists."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anet_core.identity import DocumentError, Identity, sign_document, verify_document
from anet_core.util.canonical import b64u, canonical_json

CARD = {"name": "translator", "skills": [{"id": "translate", "tags": ["fr", "en"]}],
        "charge": "free", "homeHub": "wss://hub.example", "nested": {"n": 1, "f": 0.5}}


@pytest.fixture(scope="module")
def alice(tmp_path_factory: pytest.TempPathFactory) -> Identity:
    return Identity.create(tmp_path_factory.mktemp("alice") / "identity")


@pytest.fixture
def fresh(tmp_path: Path) -> Identity:
    return Identity.create(tmp_path / "identity")


def reason_of(doc: Any, identity: Identity, **kwargs: Any) -> str:
    with pytest.raises(DocumentError) as caught:
        verify_document(doc, identity.verified_history, **kwargs)
    assert str(caught.value)
    return caught.value.reason


def test_round_trip(alice: Identity) -> None:
    signed = sign_document(alice, CARD)
    assert signed["signer"] == alice.aid and signed["keySeq"] == 0
    assert verify_document(signed, alice.verified_history) == CARD
    assert CARD.keys().isdisjoint({"signer", "keySeq", "signature"})  # input not mutated


def test_resigning_replaces_the_signature_fields(fresh: Identity) -> None:
    signed = sign_document(fresh, CARD)
    fresh.rotate()
    resigned = sign_document(fresh, signed)
    assert resigned["keySeq"] == 1
    assert verify_document(resigned, fresh.verified_history, require_current_key=True) == CARD


@pytest.mark.parametrize("change", [
    lambda doc: doc.update(name="impostor"),
    lambda doc: doc["skills"][0]["tags"].append("de"),
    lambda doc: doc.update(extra=True),
    lambda doc: doc.pop("charge"),
])
def test_any_change_breaks_the_signature(alice: Identity, change: Any) -> None:
    signed = sign_document(alice, CARD)
    change(signed)
    assert reason_of(signed, alice) == "bad-signature"


def test_claiming_another_key_seq_breaks_the_signature(fresh: Identity) -> None:
    fresh.rotate()
    signed = sign_document(fresh, CARD) | {"keySeq": 0}
    assert reason_of(signed, fresh) == "bad-signature"


def test_wrong_signer(alice: Identity, fresh: Identity) -> None:
    assert reason_of(sign_document(fresh, CARD), alice) == "wrong-signer"
    impostor = sign_document(fresh, CARD) | {"signer": alice.aid}
    assert reason_of(impostor, alice) == "bad-signature"


def test_key_seq_outside_the_history(fresh: Identity) -> None:
    signed = sign_document(fresh, CARD) | {"keySeq": 7}
    assert reason_of(signed, fresh) == "unknown-key"
    assert reason_of(signed | {"keySeq": "0"}, fresh) == "unknown-key"


def test_older_key_verifies_unless_the_current_one_is_required(fresh: Identity) -> None:
    signed = sign_document(fresh, CARD)
    fresh.rotate()
    assert verify_document(signed, fresh.verified_history) == CARD
    assert reason_of(signed, fresh, require_current_key=True) == "stale-key"


def test_emergency_rotation_revokes_older_signatures(fresh: Identity) -> None:
    signed = sign_document(fresh, CARD)
    fresh.rotate(emergency=True)
    assert reason_of(signed, fresh) == "revoked-key"
    assert verify_document(sign_document(fresh, CARD), fresh.verified_history) == CARD


@pytest.mark.parametrize("doc", [
    "text", ["list"], {"name": "unsigned"},
    {"signer": "x", "keySeq": 0},
])
def test_malformed(alice: Identity, doc: Any) -> None:
    assert reason_of(doc, alice) == "malformed"


def test_malformed_signature(alice: Identity) -> None:
    signed = sign_document(alice, CARD)
    assert reason_of(signed | {"signature": signed["signature"] + "A"}, alice) == "malformed"


def test_raw_signature_does_not_pass_as_a_document(alice: Identity) -> None:
    signed = sign_document(alice, CARD)
    unsigned = {key: value for key, value in signed.items() if key != "signature"}
    raw = alice.sign(canonical_json(unsigned))
    assert reason_of(unsigned | {"signature": b64u(raw)}, alice) == "bad-signature"


def test_sign_document_refuses_non_objects(alice: Identity) -> None:
    with pytest.raises(TypeError):
        sign_document(alice, ["not", "an", "object"])  # type: ignore[arg-type]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-2**63, 2**63) | st.text(max_size=20)
    | st.floats(allow_nan=False, allow_infinity=False),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children,
                                                                     max_size=4),
    max_leaves=20)


@settings(max_examples=75, deadline=None)
@given(doc=st.dictionaries(st.text(max_size=10), json_values, max_size=6))
def test_any_json_document_round_trips(alice: Identity, doc: dict[str, Any]) -> None:
    expected = {key: value for key, value in doc.items()
                if key not in ("signer", "keySeq", "signature")}
    assert verify_document(sign_document(alice, doc), alice.verified_history) == expected


def test_jws_signing_is_raw_ed25519_and_refuses_anything_but_a_signing_input(tmp_path) -> None:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    from anet_core.identity import Identity
    from anet_core.util.canonical import unb64u

    identity = Identity.create(tmp_path / "identity")
    signing_input = b"eyJhbGciOiJFZERTQSJ9.eyJhIjoxfQ"
    signature = identity.signer().sign_jws(signing_input)
    Ed25519PublicKey.from_public_bytes(unb64u(identity.signing_public_key)).verify(
        signature, signing_input)
    for bad in (b'{"seq":0}', b"a.b.c", b"a\x00.b", b""):
        with pytest.raises(ValueError, match="two base64url segments"):
            identity.signer().sign_jws(bad)
