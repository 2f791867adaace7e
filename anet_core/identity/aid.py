"""The AID: a node's permanent, URL-safe name, derived from its genesis key statement."""

from __future__ import annotations

import base64
import hashlib
import re
from typing import Any

from anet_core.errors import AnetError
from anet_core.util.canonical import canonical_json

AID_REGEX = "[a-z2-7]{32}"
"""Unanchored, for embedding in other patterns (aiohttp route segments: ``{aid:[a-z2-7]{32}}``)."""

AID_PATTERN = re.compile(rf"\A{AID_REGEX}\Z")
"""Anchored at both ends (``\\Z``, so a trailing newline does not slip through ``match``)."""

AID_HINT = "copy the AID from `anet agents`"


class AidError(AnetError, ValueError):
    """A value that should be an AID is not one (``reason`` ``invalid-aid``)."""


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


def check_aid(aid: object, *, hint: str = AID_HINT) -> str:
    """Return ``aid`` when it is a valid AID; raise :class:`AidError` naming the value (and
    saying where to find the right one: ``hint``) otherwise."""
    if not isinstance(aid, str) or not is_aid(aid):
        raise AidError("invalid-aid", f"{repr(aid)[:80]} is not an AID (32 characters of a-z "
                                      "and 2-7)", hint=hint)
    return aid
