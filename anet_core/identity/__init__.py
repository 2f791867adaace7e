"""Node identity: the AID, key histories, private keys, signatures and signed documents.

See ``docs/protocol.md`` ("Identity and key history", "Signed documents") for the wire formats.
"""

from __future__ import annotations

from anet_core.identity.aid import (
    AID_PATTERN,
    AID_REGEX,
    AidError,
    check_aid,
    derive_aid,
    is_aid,
)
from anet_core.identity.documents import DocumentError, sign_document, verify_document
from anet_core.identity.history import (
    HistoryError,
    KeyStatement,
    VerifiedHistory,
    statement_hash,
    verify_history,
)
from anet_core.identity.keystore import Identity, IdentityError, Signer
from anet_core.identity.signatures import RAW_CONTEXT, verify_signature

__all__ = [
    "AID_PATTERN",
    "AID_REGEX",
    "RAW_CONTEXT",
    "AidError",
    "DocumentError",
    "HistoryError",
    "Identity",
    "IdentityError",
    "KeyStatement",
    "Signer",
    "VerifiedHistory",
    "check_aid",
    "derive_aid",
    "is_aid",
    "sign_document",
    "statement_hash",
    "verify_document",
    "verify_history",
    "verify_signature",
]
