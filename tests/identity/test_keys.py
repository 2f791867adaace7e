"""The crypto primitives (libsodium) against an independent implementation (OpenSSL's, through
``cryptography``) and the RFCs' own vectors: the same keys, signatures, shared secrets, derived
keys and ciphertexts, so key files and envelopes made before or elsewhere still load and open."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey, X25519PublicKey
from cryptography.hazmat.primitives.ciphers.aead import ChaCha20Poly1305
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.hazmat.primitives.serialization import Encoding, NoEncryption, PrivateFormat

from anet_core.identity import Identity, verify_signature
from anet_core.identity.history import build_statement, verify_history
from anet_core.identity.keys import (
    DecryptionError,
    EncryptionKey,
    SigningKey,
    aead_decrypt,
    aead_encrypt,
    hkdf_sha256,
    verify_ed25519,
)
from anet_core.identity.keystore import HISTORY_FILE
from anet_core.util.canonical import b64u
from anet_core.util.fsutil import write_private


def raw(key: Ed25519PrivateKey | X25519PrivateKey) -> bytes:
    return key.private_bytes(Encoding.Raw, PrivateFormat.Raw, NoEncryption())


def test_ed25519_agrees_with_openssl_and_rfc_8032() -> None:
    # RFC 8032, section 7.1, TEST 1: the empty message.
    seed = bytes.fromhex("9d61b19deffd5a60ba844af492ec2cc44449c5697b326919703bac031cae7f60")
    key = SigningKey(seed)
    assert key.public.hex() == "d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"
    assert key.sign(b"").hex() == (
        "e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e06522490155"
        "5fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b")
    theirs = Ed25519PrivateKey.generate()
    ours = SigningKey(raw(theirs))
    assert ours.raw == raw(theirs) and ours.sign(b"data") == theirs.sign(b"data")
    assert ours.public == theirs.public_key().public_bytes_raw()
    assert verify_ed25519(ours.public, theirs.sign(b"data"), b"data")
    assert not verify_ed25519(ours.public, theirs.sign(b"data"), b"other data")
    assert not verify_ed25519(ours.public[:31], theirs.sign(b"data"), b"data")
    assert not verify_ed25519(ours.public, theirs.sign(b"data")[:63], b"data")
    with pytest.raises(ValueError, match="32 bytes, got 31"):
        SigningKey(seed[:31])


def test_x25519_agrees_with_openssl_and_refuses_a_low_order_point() -> None:
    theirs, ours = X25519PrivateKey.generate(), EncryptionKey.generate()
    assert EncryptionKey(raw(theirs)).public == theirs.public_key().public_bytes_raw()
    assert ours.exchange(theirs.public_key().public_bytes_raw()) == theirs.exchange(
        X25519PublicKey.from_public_bytes(ours.public))
    with pytest.raises(ValueError, match="low-order"):
        ours.exchange(bytes(32))
    with pytest.raises(ValueError, match="32 bytes"):
        ours.exchange(bytes(31))
    assert "EncryptionKey(<private>)" == repr(ours) and ours.raw.hex() not in repr(ours)


def test_hkdf_sha256_is_rfc_5869() -> None:
    # RFC 5869, appendix A.1 (42 bytes: two blocks of output).
    derived = hkdf_sha256(bytes.fromhex("0b" * 22),
                          salt=bytes.fromhex("000102030405060708090a0b0c"),
                          info=bytes.fromhex("f0f1f2f3f4f5f6f7f8f9"), length=42)
    assert derived.hex() == ("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf"
                             "34007208d5b887185865")
    shared, salt = os.urandom(32), os.urandom(64)
    assert hkdf_sha256(shared, salt=salt, info=b"anet-envelope-v1") == HKDF(
        algorithm=hashes.SHA256(), length=32, salt=salt, info=b"anet-envelope-v1").derive(shared)


def test_chacha20_poly1305_agrees_with_openssl() -> None:
    key, nonce, data = os.urandom(32), os.urandom(12), b"associated"
    sealed = aead_encrypt(key, nonce, b"plaintext", data)
    assert sealed == ChaCha20Poly1305(key).encrypt(nonce, b"plaintext", data)
    assert aead_decrypt(key, nonce, sealed, data) == b"plaintext"
    for changed in (sealed[:-1] + bytes([sealed[-1] ^ 1]), sealed[:8]):
        with pytest.raises(DecryptionError):
            aead_decrypt(key, nonce, changed, data)
    with pytest.raises(DecryptionError):
        aead_decrypt(key, nonce, sealed, b"other")


def test_an_identity_whose_keys_openssl_made_still_loads(tmp_path: Path) -> None:
    """Key files hold the raw 32 bytes: what an identity created with ``cryptography`` wrote."""
    signing, recovery = Ed25519PrivateKey.generate(), Ed25519PrivateKey.generate()
    encryption = X25519PrivateKey.generate()
    statement = build_statement(
        seq=0, kind="genesis", signing_key=signing.public_key().public_bytes_raw(),
        encryption_key=encryption.public_key().public_bytes_raw(),
        recovery_key=recovery.public_key().public_bytes_raw(), prev=None, created=1_700_000_000,
        signer=SigningKey(raw(signing)), recovery_signer=SigningKey(raw(recovery)))
    history = verify_history([statement.to_dict()])
    directory = tmp_path / "identity"
    directory.mkdir(mode=0o700)
    (directory / HISTORY_FILE).write_text(json.dumps(history.to_list()))
    for role, key in (("signing", signing), ("encryption", encryption), ("recovery", recovery)):
        write_private(directory / f"{role}-0.key", b64u(raw(key)) + "\n")

    identity = Identity.load(directory)
    assert identity.aid == history.aid
    assert verify_signature(identity.signing_public_key, b"hello", identity.sign(b"hello"))
    assert identity.encryption_private_keys()[0].raw == raw(encryption)
