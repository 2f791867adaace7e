"""Ed25519 signatures with domain separation.

Every signature anet makes is over ``context || 0x00 || message``. The context names what is signed
(a key statement, a document, an envelope payload, an evidence record, or "raw" bytes a caller
chose), so a signature made for one purpose never verifies for another. Without it, a hub that asks
a node to sign a registration challenge could send the canonical bytes of a key statement rotating
the node's identity to the hub's own key, and receive a valid rotation back.

Contexts contain no NUL byte and are all distinct, so the signed byte strings of two different
contexts can never be equal.
"""

from __future__ import annotations

import re

from anet_core.identity.encoding import decode_b64u
from anet_core.identity.keys import KEY_BYTES, SIGNATURE_BYTES, SigningKey, verify_ed25519

PUBLIC_KEY_BYTES = KEY_BYTES

KEY_STATEMENT_CONTEXT = "anet-key-statement-v1"
DOCUMENT_CONTEXT = "anet-document-v1"
ENVELOPE_CONTEXT = "anet-envelope-v1"
EVIDENCE_CONTEXT = "anet-evidence-v1"
RAW_CONTEXT = "anet-raw-v1"
"""The default context of ``Identity.sign`` / ``verify_signature`` (challenges and other bytes)."""

RESERVED_CONTEXTS = frozenset({KEY_STATEMENT_CONTEXT})
"""Contexts that ``Identity.sign`` refuses: only the key history code may sign key statements."""

_CONTEXT_PATTERN = re.compile(r"\A[a-z0-9][a-z0-9.-]{0,63}\Z")


def signed_message(context: str, data: bytes) -> bytes:
    """The exact bytes an Ed25519 signature covers for ``data`` under ``context``."""
    if not _CONTEXT_PATTERN.match(context):
        raise ValueError(f"signature context {context!r} must match {_CONTEXT_PATTERN.pattern}")
    return context.encode() + b"\x00" + data


def sign_with_key(private_key: SigningKey, context: str, data: bytes) -> bytes:
    """Sign ``data`` under ``context`` with a private key held by this process."""
    return private_key.sign(signed_message(context, data))


def verify_with_key(public_key: bytes, context: str, data: bytes, signature: bytes) -> bool:
    """True when ``signature`` signs ``data`` under ``context`` for the raw ``public_key``."""
    return verify_ed25519(public_key, signature, signed_message(context, data))


def verify_signature(public_key_b64u: str, data: bytes, signature: bytes | str, *,
                     context: str = RAW_CONTEXT) -> bool:
    """True when ``signature`` (raw bytes or base64url) signs ``data`` for the given public key.

    Pairs with ``Identity.sign``: both default to the raw context. Malformed keys or signatures
    give False, never an exception, so a caller cannot mistake garbage for a verified message.
    """
    try:
        public_key = decode_b64u(public_key_b64u, what="public key", length=PUBLIC_KEY_BYTES)
        if isinstance(signature, str):
            signature = decode_b64u(signature, what="signature", length=SIGNATURE_BYTES)
    except ValueError:
        return False
    return verify_with_key(public_key, context, data, signature)
