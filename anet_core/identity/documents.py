"""Signed documents: network cards, extended cards, receipts, reviews, hub-operator lists.

A signed document is any JSON object plus three fields::

    "signer":    the AID of the signer
    "keySeq":    the seq of the key statement whose signing key signed
    "signature": base64url Ed25519 signature over the canonical JSON of the document without
                 "signature" (so "signer" and "keySeq" are covered), under the document context

The three names are reserved at the top level of every signed document.
"""

from __future__ import annotations

from typing import Any

from anet_core.errors import ReasonError
from anet_core.identity.encoding import decode_b64u
from anet_core.identity.history import VerifiedHistory
from anet_core.identity.keystore import Identity
from anet_core.identity.signatures import DOCUMENT_CONTEXT, SIGNATURE_BYTES, verify_with_key
from anet_core.util.canonical import b64u, canonical_json

DOCUMENT_SIGNATURE_FIELDS = ("signer", "keySeq", "signature")


class DocumentError(ReasonError, ValueError):
    """A signed document that must not be trusted. ``reason``: malformed, wrong-signer, unknown-key,
    revoked-key, stale-key or bad-signature."""


def sign_document(identity: Identity, doc: dict[str, Any]) -> dict[str, Any]:
    """Return a copy of ``doc`` signed with the identity's current key.

    Signature fields already in ``doc`` are replaced, so re-signing a card after a rotation is
    just another call.
    """
    if not isinstance(doc, dict):
        raise TypeError(f"a signed document must be a JSON object, got {type(doc).__name__}")
    signer = identity.signer()
    unsigned = {key: value for key, value in doc.items() if key not in DOCUMENT_SIGNATURE_FIELDS}
    unsigned |= {"signer": signer.aid, "keySeq": signer.key_seq}
    signature = signer.sign(canonical_json(unsigned), context=DOCUMENT_CONTEXT)
    return unsigned | {"signature": b64u(signature)}


def verify_document(doc: object, history: VerifiedHistory, *,
                    require_current_key: bool = False) -> dict[str, Any]:
    """Check ``doc`` was signed by ``history``'s identity; return it without the signature fields.

    A key superseded by a later emergency rotation is refused (``revoked-key``).
    ``require_current_key`` also refuses any key but the current one (``stale-key``): cards must
    be signed with the current key, receipts may be older.
    """
    if not isinstance(doc, dict):
        raise DocumentError("malformed", f"a signed document must be a JSON object, "
                                         f"got {type(doc).__name__}")
    missing = [name for name in DOCUMENT_SIGNATURE_FIELDS if name not in doc]
    if missing:
        raise DocumentError("malformed", f"the document lacks {', '.join(missing)}; "
                                         "it is not signed")
    signer, key_seq = doc["signer"], doc["keySeq"]
    if signer != history.aid:
        raise DocumentError("wrong-signer", f"the document is signed by {signer!r}, "
                                            f"not by {history.aid}")
    try:
        public_key = history.signing_key_at(key_seq)
    except LookupError as error:
        raise DocumentError("unknown-key", str(error)) from None
    if history.is_revoked(key_seq):
        raise DocumentError("revoked-key", f"key seq {key_seq} of {history.aid} was revoked by an "
                                           "emergency rotation; ask for a newly signed document")
    if require_current_key and key_seq != history.key_seq:
        raise DocumentError("stale-key", f"the document is signed with key seq {key_seq}, but "
                                         f"{history.aid} is at key seq {history.key_seq}; ask for "
                                         "a document signed with the current key")
    try:
        signature = decode_b64u(doc["signature"], what="signature", length=SIGNATURE_BYTES)
    except ValueError as error:
        raise DocumentError("malformed", str(error)) from None
    unsigned = {key: value for key, value in doc.items() if key != "signature"}
    try:
        signed_bytes = canonical_json(unsigned)
    except (TypeError, ValueError) as error:
        raise DocumentError("malformed", f"the document is not plain JSON: {error}") from None
    if not verify_with_key(public_key, DOCUMENT_CONTEXT, signed_bytes, signature):
        raise DocumentError("bad-signature", f"the signature does not verify with key seq "
                                             f"{key_seq} of {history.aid}; the document was "
                                             "changed or signed by someone else")
    return {key: value for key, value in doc.items() if key not in DOCUMENT_SIGNATURE_FIELDS}
