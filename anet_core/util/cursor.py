"""Opaque paging cursors: a position in a listing, as URL-safe text that only its maker reads.

The node's task list (``pageToken``) and the hub's directory search (``cursor``) both hand one
out with a page and take it back for the next. The text is base64url of canonical JSON; a
cursor that does not decode is the caller's to refuse (it names its own error).
"""

from __future__ import annotations

import json
from typing import Any

from anet_core.util.canonical import b64u, canonical_json, unb64u


def encode_cursor(position: dict[str, Any]) -> str:
    return b64u(canonical_json(position))


def decode_cursor(cursor: str) -> dict[str, Any]:
    """The position ``cursor`` stands for; ``ValueError`` when it is not a cursor at all."""
    try:
        position = json.loads(unb64u(cursor))
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"not a cursor: {error}") from None
    if not isinstance(position, dict):
        raise ValueError("not a cursor: it holds no position")
    return position
