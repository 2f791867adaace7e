"""Strict JSON input: the one reader for what a client, a peer or a node sends.

``json.loads`` takes more than JSON (RFC 8259) and more than a later reader can render:
``NaN`` and ``Infinity`` (and ``1e400``, read as infinity); lone UTF-16 surrogates such as
``"\\ud800"``, which no UTF-8 writer can encode, so a stored one breaks every later answer that
contains it; and nesting so deep that the recursive code reading it later (validation,
rendering, ``json.dumps``) runs out of stack. :func:`parse_json` refuses all of them with a
``ValueError`` that says what is wrong, before anything is stored; a caller that needs the
document's shape first (to echo a JSON-RPC id) uses :func:`load_json` and then
:func:`check_value`, when :func:`may_hold_surrogate` says there can be something to find.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

MAX_DEPTH = 64
"""Arrays and objects nest at most this deep; A2A's own structure takes five or six levels
(JSON-RPC request, params, message, parts, part, metadata), the rest is for data parts."""

_SURROGATE = re.compile("[\ud800-\udfff]")
_MAY_HOLD_SURROGATE = re.compile(r"\\u[dD][89a-fA-F]|[\ud800-\udfff]")
"""What a text that decodes to a surrogate contains: the escape of one, or one itself. A text
without either needs no :func:`check_value` (an escaped backslash before ``ud8..`` matches too,
and only costs the check)."""


class UnencodableText(ValueError):
    """A string of the document holds a lone surrogate; ``where`` names it (``params.id``)."""

    def __init__(self, where: str, codepoint: int) -> None:
        super().__init__(f"{where or 'the document'} holds the lone surrogate U+{codepoint:04X}, "
                         "which is not Unicode text (send UTF-8, or the \\u escapes of a whole "
                         "surrogate pair)")
        self.where = where


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON (RFC 8259 has no NaN or Infinity)")


def _finite(text: str) -> float:
    value = float(text)
    if not math.isfinite(value):
        raise ValueError(f"the number {text[:40]} is too large for a double")
    return value


_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite)
"""One decoder for every document: ``json.loads`` with these options would build one per call."""


def load_json(data: bytes | str) -> Any:
    """JSON text as RFC 8259 defines it (no NaN, no Infinity), nested at most
    :data:`MAX_DEPTH` levels; ``ValueError`` otherwise."""
    return _load(_text(data))


def _text(data: bytes | str) -> str:
    if isinstance(data, str):
        if data.startswith("\ufeff"):
            raise ValueError("Unexpected UTF-8 BOM (decode using utf-8-sig)")
        return data
    return data.decode(json.detect_encoding(data), "surrogatepass")


def _load(text: str) -> Any:
    too_deep = ValueError(f"the JSON nests deeper than {MAX_DEPTH} levels of arrays and objects")
    try:
        value = _DECODER.decode(text)
    except RecursionError:
        raise too_deep from None
    if text.count("[") + text.count("{") <= MAX_DEPTH:
        return value  # too few brackets to nest deeper, whatever they are
    level: list[Any] = [value]
    for _ in range(MAX_DEPTH):
        level = [child for item in level if isinstance(item, dict | list)
                 for child in (item.values() if isinstance(item, dict) else item)]
        if not level:
            return value
    if any(isinstance(item, dict | list) for item in level):
        raise too_deep
    return value


def _surrogate(text: str) -> int | None:
    if text.isascii():
        return None
    match = _SURROGATE.search(text)
    return None if match is None else ord(match.group())


def _path(link: tuple[Any, str] | None) -> str:
    parts: list[str] = []
    while link is not None:
        link, part = link
        parts.append(part)
    return "".join(reversed(parts)).lstrip(".")


def check_value(value: Any) -> None:
    """Raise :class:`UnencodableText` when a string or key of ``value`` holds a lone surrogate.

    Iterative, so no document is too deep for it.
    """
    stack: list[tuple[Any, tuple[Any, str] | None]] = [(value, None)]
    while stack:
        item, link = stack.pop()
        if isinstance(item, str):
            if (codepoint := _surrogate(item)) is not None:
                raise UnencodableText(_path(link), codepoint)
        elif isinstance(item, dict):
            for key, child in item.items():
                if (codepoint := _surrogate(key)) is not None:
                    raise UnencodableText(_path((link, f".{key!r}")), codepoint)
                stack.append((child, (link, f".{key}")))
        elif isinstance(item, list):
            stack.extend((child, (link, f"[{index}]")) for index, child in enumerate(item))


def may_hold_surrogate(data: bytes | str) -> bool:
    """False when ``data`` cannot decode to a lone surrogate: :func:`check_value` of its value
    would find none."""
    text = _text(data)
    if text.isascii() and "\\u" not in text:
        # No escape and no surrogate itself (one is not ASCII): what every envelope, frame and
        # task of ASCII text is. Both tests take a fraction of the search below, which tries its
        # pattern at every character (36 µs against 2 for a frame of 2 KiB).
        return False
    return _MAY_HOLD_SURROGATE.search(text) is not None


def parse_json(data: bytes | str) -> Any:
    """The JSON value of ``data``; ``ValueError`` for anything that is not strict JSON text."""
    text = _text(data)
    value = _load(text)
    if may_hold_surrogate(text):
        check_value(value)
    return value
