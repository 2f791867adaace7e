"""The primitives of anet's crypto, from libsodium (PyNaCl): Ed25519 keys and signatures, X25519
keys and agreement, HKDF-SHA256 (RFC 5869) and ChaCha20-Poly1305 in its IETF form (RFC 8439).

libsodium rather than the ``cryptography`` package: every node and hub process holds the crypto
library's code in memory, and ``cryptography``'s extension carries an OpenSSL of its own beside the
one ``ssl`` already loads (6.4 MiB more per process; PyNaCl 1.0 MiB), for the same operations at the
same speed (docs/performance.md, "Idle memory"). Keys are the raw 32 bytes RFC 8032 and RFC 7748
define (an Ed25519 seed, an X25519 scalar), so key files and wire formats are library-neutral.
"""

from __future__ import annotations

import hashlib
import hmac
import os

from nacl import bindings, exceptions

KEY_BYTES = 32
SIGNATURE_BYTES = 64
AEAD_TAG_BYTES = 16
_SHA256_BYTES = 32


class SigningKey:
    """An Ed25519 private key (its 32-byte seed) and its public key."""

    __slots__ = ("_secret", "public")

    def __init__(self, seed: bytes) -> None:
        if len(seed) != KEY_BYTES:
            raise ValueError(f"an Ed25519 private key is {KEY_BYTES} bytes, got {len(seed)}")
        self.public, self._secret = bindings.crypto_sign_seed_keypair(bytes(seed))

    @classmethod
    def generate(cls) -> SigningKey:
        return cls(os.urandom(KEY_BYTES))

    @property
    def raw(self) -> bytes:
        """The raw private key (the seed): what a key file holds."""
        return self._secret[:KEY_BYTES]

    def sign(self, message: bytes) -> bytes:
        """The 64-byte Ed25519 signature of ``message``."""
        return bindings.crypto_sign(message, self._secret)[:SIGNATURE_BYTES]

    def __repr__(self) -> str:
        return "SigningKey(<private>)"


def verify_ed25519(public_key: bytes, signature: bytes, message: bytes) -> bool:
    """True when ``signature`` is ``public_key``'s Ed25519 signature of ``message``."""
    if len(public_key) != KEY_BYTES or len(signature) != SIGNATURE_BYTES:
        return False
    try:
        bindings.crypto_sign_open(signature + message, public_key)
    except exceptions.CryptoError:
        return False
    return True


class EncryptionKey:
    """An X25519 private key (its 32-byte scalar) and its public key."""

    __slots__ = ("_secret", "public")

    def __init__(self, secret: bytes) -> None:
        if len(secret) != KEY_BYTES:
            raise ValueError(f"an X25519 private key is {KEY_BYTES} bytes, got {len(secret)}")
        self._secret = bytes(secret)
        self.public = bindings.crypto_scalarmult_base(self._secret)

    @classmethod
    def generate(cls) -> EncryptionKey:
        return cls(os.urandom(KEY_BYTES))

    @property
    def raw(self) -> bytes:
        """The raw private key: what a key file holds."""
        return self._secret

    def exchange(self, peer_public: bytes) -> bytes:
        """The X25519 shared secret with ``peer_public``; ValueError for a key of the wrong size
        or a low-order point (the shared secret would be all zeros, known to anyone)."""
        if len(peer_public) != KEY_BYTES:
            raise ValueError(f"an X25519 public key is {KEY_BYTES} bytes, got {len(peer_public)}")
        try:
            return bindings.crypto_scalarmult(self._secret, bytes(peer_public))
        except exceptions.RuntimeError:
            raise ValueError("the X25519 public key is a low-order point") from None

    def __repr__(self) -> str:
        return "EncryptionKey(<private>)"


def hkdf_sha256(secret: bytes, *, salt: bytes, info: bytes, length: int = KEY_BYTES) -> bytes:
    """HKDF-SHA256 (RFC 5869): extract with ``salt``, expand with ``info``."""
    pseudo_random_key = hmac.digest(salt, secret, hashlib.sha256)
    output, block = b"", b""
    for counter in range(1, -(-length // _SHA256_BYTES) + 1):
        block = hmac.digest(pseudo_random_key, block + info + bytes([counter]), hashlib.sha256)
        output += block
    return output[:length]


class DecryptionError(ValueError):
    """The ciphertext, its tag, the nonce, the key or the associated data do not match."""


def aead_encrypt(key: bytes, nonce: bytes, plaintext: bytes, associated_data: bytes) -> bytes:
    """ChaCha20-Poly1305 (IETF, 12-byte nonce): the ciphertext followed by its 16-byte tag."""
    return bindings.crypto_aead_chacha20poly1305_ietf_encrypt(plaintext, associated_data, nonce,
                                                              key)


def aead_decrypt(key: bytes, nonce: bytes, ciphertext: bytes, associated_data: bytes) -> bytes:
    """The plaintext of :func:`aead_encrypt`'s output; DecryptionError when it does not open."""
    if len(ciphertext) < AEAD_TAG_BYTES:
        raise DecryptionError("the ciphertext is shorter than its tag")
    try:
        return bindings.crypto_aead_chacha20poly1305_ietf_decrypt(ciphertext, associated_data,
                                                                  nonce, key)
    except exceptions.CryptoError:
        raise DecryptionError("the ciphertext does not authenticate") from None
