"""Strict decoding of the base64url fields that carry keys, signatures, hashes and nonces.

``anet_core.util.canonical.unb64u`` is lenient (the standard library skips characters outside the
alphabet and ignores non-zero padding bits). For anything that is signed, hashed or compared, a
lenient decoder would let several texts stand for the same bytes; so every protocol field is decoded
here, where exactly one text is accepted for each byte string.
"""

from __future__ import annotations

import binascii

_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
_ALPHABET_BYTES = _ALPHABET.encode()
_VALUE = {char: value for value, char in enumerate(_ALPHABET)}
_UNUSED_BITS = (0, 0, 0x0F, 0x03)
"""By ``len(text) % 4``: the bits of the last character that encode no byte. Canonical text
has them zero (any other value decodes to the same bytes)."""
_PADDING = (b"", b"", b"==", b"=")
_TO_STANDARD = bytes.maketrans(b"-_", b"+/")


def check_b64u(text: object, *, what: str, length: int | None = None,
               max_length: int | None = None) -> int:
    """The decoded size of canonical unpadded base64url ``text``, decoding nothing (a hub
    routes large ciphertexts by it); ``ValueError`` naming ``what`` for anything else.

    ``length`` demands an exact decoded size (keys, signatures, nonces); ``max_length`` bounds it
    before any other check, so an oversized field costs nothing.
    """
    if not isinstance(text, str):
        # ValueError, not TypeError: callers catch one error for any bad field of a peer's message.
        raise ValueError(f"{what} must be base64url text, got {type(text).__name__}")
    if max_length is not None and len(text) > (max_length * 4 + 2) // 3:
        raise ValueError(f"{what} is longer than {max_length} bytes")
    tail = len(text) % 4
    if tail == 1 or not _is_base64url_text(text):
        raise ValueError(f"{what} is not unpadded base64url text")
    if tail and _VALUE[text[-1]] & _UNUSED_BITS[tail]:
        # Non-zero padding bits: another text decodes to the same bytes.
        raise ValueError(f"{what} is not canonical base64url")
    size = len(text) * 3 // 4
    if length is not None and size != length:
        raise ValueError(f"{what} must be {length} bytes, got {size}")
    return size


def decode_b64u(text: object, *, what: str, length: int | None = None,
                max_length: int | None = None) -> bytes:
    """Decode canonical unpadded base64url ``text``; raise ``ValueError`` naming ``what`` otherwise
    (the checks of :func:`check_b64u`)."""
    check_b64u(text, what=what, length=length, max_length=max_length)
    assert isinstance(text, str)  # checked
    return decode_checked_b64u(text)


def _is_base64url_text(text: str) -> bool:
    """Only characters of the alphabet: deleting them leaves nothing (a quarter of the time a
    regular expression takes over a ciphertext of 2 KiB; the ASCII test first, so that the
    encoding cannot fail)."""
    return text.isascii() and not text.encode("ascii").translate(None, _ALPHABET_BYTES)


def decode_checked_b64u(text: str) -> bytes:
    """The bytes of ``text`` that :func:`check_b64u` accepted."""
    return binascii.a2b_base64(text.encode().translate(_TO_STANDARD) + _PADDING[len(text) % 4])
