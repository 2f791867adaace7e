"""Canonical JSON: the one byte form that anet signs and hashes."""

from __future__ import annotations

import base64
import json
from typing import Any


def canonical_json(value: Any) -> bytes:
    """Sorted keys, no insignificant white space, UTF-8: equal values give equal bytes."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False,
                      allow_nan=False).encode()


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
