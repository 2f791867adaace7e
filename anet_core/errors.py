"""The one error type the user sees, and how it is shown."""

from __future__ import annotations


class AnetError(Exception):
    """An error the user can act on.

    ``reference`` is a stable kebab-case name (for scripts and docs), ``message`` says what was
    wrong with the offending value, ``hint`` says what to do. The CLI prints it in one place.
    """

    def __init__(self, reference: str, message: str, *, hint: str = "", detail: str = "") -> None:
        super().__init__(message)
        self.reference = reference
        self.message = message
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
        return {"error": self.reference, "message": self.message, "hint": self.hint,
                "detail": self.detail}
