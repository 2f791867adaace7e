"""Go duration syntax ("1h30m", "2m", "1.5s", "0"), as config.json's durations use it
(docs/configuration.md, "Durations")."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Annotated

from pydantic import BeforeValidator, PlainSerializer

MAX_DURATION_S = 100 * 365 * 24 * 3600.0
"""Longer is a typo (and past what ``timedelta`` and a float timer hold without overflow)."""
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_TERM = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_duration(text: str) -> timedelta:
    """Parse a Go duration; "0" alone may omit the unit. Negative durations are refused."""
    if not isinstance(text, str):
        raise ValueError(f"expected a Go duration such as \"2m\" or \"1h30m\", got {text!r}")
    if text == "0":
        return timedelta(0)
    position, seconds = 0, 0.0
    for match in _TERM.finditer(text):
        if match.start() != position:
            break
        seconds += float(match.group(1)) * _UNITS[match.group(2)]
        position = match.end()
    if position != len(text) or not text:
        raise ValueError(
            f"{text!r} is not a Go duration: write a number and a unit (ns, us, ms, s, m, h), "
            "for example \"90s\", \"2m\" or \"1h30m\"")
    if seconds > MAX_DURATION_S:
        raise ValueError(f"{text[:40]!r} is longer than {MAX_DURATION_S / 3600:g}h, which no "
                         "setting of anet needs (Go itself caps durations near 292 years)")
    return timedelta(seconds=seconds)


def format_duration(value: timedelta) -> str:
    """The shortest Go duration for ``value`` at one-second precision or finer."""
    total = value.total_seconds()
    if total == 0:
        return "0s"
    hours, rest = divmod(total, 3600)
    minutes, seconds = divmod(rest, 60)
    text = (f"{int(hours)}h" if hours else "") + (f"{int(minutes)}m" if minutes else "")
    if seconds:
        text += f"{seconds:g}s"
    return text


def _coerce(value: object) -> object:
    return value if isinstance(value, timedelta) else parse_duration(value)  # type: ignore[arg-type]


GoDuration = Annotated[timedelta, BeforeValidator(_coerce), PlainSerializer(format_duration)]
"""A pydantic field type that reads and writes Go durations."""
