"""One line per step as it finishes: a mark, what happened, how long it took."""

from __future__ import annotations

import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import TextIO


def _marks(stream: TextIO) -> tuple[str, str]:
    """✓ and ✗ where the terminal can show them, else plain words."""
    try:
        "✓✗→".encode(stream.encoding or "ascii")
    except (UnicodeEncodeError, LookupError):
        return "ok", "FAILED"
    return "✓", "✗"


@dataclass
class Step:
    """What a running step will print when it ends; set ``result`` to say what it achieved."""

    what: str
    result: str = ""


class Progress:
    """Prints each step when it ends. Steps may run concurrently; each line names its own."""

    def __init__(self, stream: TextIO | None = None, *, quiet: bool = False) -> None:
        self.stream = stream or sys.stdout
        self.quiet = quiet
        self.ok, self.failed = _marks(self.stream)
        self.arrow = "→" if self.ok == "✓" else "->"

    def line(self, text: str = "") -> None:
        if not self.quiet:
            print(text, file=self.stream, flush=True)

    @asynccontextmanager
    async def step(self, what: str) -> AsyncIterator[Step]:
        """``async with progress.step("starting the hub") as step: ...; step.result = "..."``"""
        step = Step(what)
        started = time.perf_counter()
        try:
            yield step
        except BaseException as error:
            if not isinstance(error, (KeyboardInterrupt, GeneratorExit)) and \
                    type(error).__name__ != "CancelledError":
                self.line(f"  {self.failed} {what}")
            raise
        self.line(f"  {self.ok} {step.result or what} ({_duration(time.perf_counter() - started)})")


def _duration(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.1f} s"
