"""The errors that carry a reason, and the one error type the user sees (and how it is shown)."""

from __future__ import annotations


class ReasonError(Exception):
    """An error with a ``reason``: a stable kebab-case word for code, scripts, docs and the wire
    (``unknown-key``, ``rate-limited``), beside the ``message`` a person reads.

    The identity, envelope, directory and hub errors all derive from it, so a caller that only
    needs the word reads ``error.reason`` whatever raised it.
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


class AnetError(ReasonError):
    """An error the user can act on.

    ``reason`` is a stable kebab-case name (for scripts and docs), ``message`` says what was
    wrong with the offending value, ``hint`` says what to do. The CLI prints it in one place.
    """

    def __init__(self, reason: str, message: str, *, hint: str = "", detail: str = "") -> None:
        super().__init__(reason, message)
        self.hint = hint
        self.detail = detail

    def render(self) -> str:
        lines = [f"error: {self.message}"]
        if self.detail:
            lines.append(self.detail.rstrip())
        if self.hint:
            lines.append(f"hint: {self.hint}")
        return "\n".join(lines)

    def as_dict(self) -> dict[str, str]:
        return {"error": self.reason, "message": self.message, "hint": self.hint,
                "detail": self.detail}
