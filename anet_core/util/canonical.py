"""Canonical JSON: the one byte form that anet signs and hashes; compact JSON text, the form
anet sends; base64url; paging cursors."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from typing import Any

_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                              allow_nan=False, check_circular=False)
"""One encoder for every call: ``json.dumps`` with options builds a new one each time, which
costs as much as encoding a small document. A value that contains itself (no JSON document
does) raises ``RecursionError`` instead of ``ValueError``."""


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no insignificant white space, UTF-8: equal values give equal bytes."""
    return _CANONICAL.encode(value).encode()


compact_json: Callable[[Any], str] = json.JSONEncoder(ensure_ascii=False,
                                                      separators=(",", ":")).encode
"""Compact one-line JSON text, UTF-8 kept raw, as the A2A SDK sends it: frames to the hub, the
wire models' text, the local endpoint's replies and events. One encoder's bound method serves
every call (on the hub link's path for every frame), as one encoder does for
:func:`canonical_json`."""


def canonical_with(key: str, value_json: bytes, fields: dict[str, Any]) -> bytes:
    """``canonical_json(fields | {key: value})`` from ``value_json``, the value's canonical bytes,
    when ``key`` sorts before every key of ``fields``: a large value encoded once serves every
    document built around it (an envelope's signed bytes and plaintext, an evidence record's
    hash, signed bytes and line)."""
    assert all(other > key for other in fields)
    head = b'{"' + key.encode() + b'":' + value_json
    return head + b"," + canonical_json(fields)[1:] if fields else head + b"}"


def is_non_negative_int(value: object) -> bool:
    """A JSON integer ``>= 0`` (``true`` and ``1.0`` are not integers here)."""
    return type(value) is int and value >= 0


def b64u(data: bytes) -> str:
    """URL-safe base64 without padding (RFC 7515 style)."""
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


def unb64u(text: str) -> bytes:
    """Inverse of :func:`b64u`; raises ``ValueError`` on anything that is not such text."""
    if not isinstance(text, str):
        raise ValueError(f"expected base64url text, got {type(text).__name__}")
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def encode_cursor(position: dict[str, Any]) -> str:
    """An opaque paging cursor for ``position`` in a listing: base64url of canonical JSON.

    The node's task list (``pageToken``) and the hub's directory search (``cursor``) hand one
    out with a page and take it back for the next; only the maker reads it.
    """
    return b64u(canonical_json(position))


def decode_cursor(cursor: str) -> dict[str, Any]:
    """The position ``cursor`` stands for; ``ValueError`` when it is not a cursor at all (the
    caller refuses it with its own error)."""
    try:
        position = json.loads(unb64u(cursor))
    except (ValueError, UnicodeDecodeError) as error:
        raise ValueError(f"not a cursor: {error}") from None
    if not isinstance(position, dict):
        raise ValueError("not a cursor: it holds no position")
    return position
