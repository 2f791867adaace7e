"""The AID: a node's permanent, URL-safe name, derived from its genesis key statement."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

from anet_core.util.canonical import canonical_json

AID_LENGTH = 32
AID_REGEX = "[a-z2-7]{32}"
"""Unanchored, for embedding in other patterns (aiohttp route segments: ``{aid:[a-z2-7]{32}}``)."""

AID_PATTERN = re.compile(rf"\A{AID_REGEX}\Z")
"""Anchored at both ends (``\\Z``, so a trailing newline does not slip through ``match``)."""


def is_aid(text: object) -> bool:
    """True when ``text`` is a syntactically valid AID (32 characters of lowercase base32)."""
    return isinstance(text, str) and AID_PATTERN.match(text) is not None


def derive_aid(genesis_body: dict[str, Any]) -> str:
    """``base32(sha256(canonical genesis body)[:20]).lower()``.

    160 bits encode to exactly 32 characters, so there is no padding to strip and every
    32-character string of the alphabet is a valid AID.
    """
    digest = hashlib.sha256(canonical_json(genesis_body)).digest()[:20]
    return base64.b32encode(digest).decode().lower()


def check_aid(aid: object) -> str:
    """Return ``aid`` when it is a valid AID; raise ``ValueError`` naming the value otherwise."""
    if not isinstance(aid, str) or AID_PATTERN.match(aid) is None:
        raise ValueError(f"{aid!r} is not an AID (32 characters of a-z and 2-7)")
    return aid
