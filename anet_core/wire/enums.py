"""A2A 1.0 enums, written by NAME as ProtoJSON does (``"ROLE_USER"``,
``"TASK_STATE_COMPLETED"``)."""

from __future__ import annotations

from enum import StrEnum


class ProtoEnum(StrEnum):
    """A proto enum whose Python value is its wire name.

    Members are declared in proto number order starting at 0, so :attr:`number` is the index.
    Input also accepts the number, as ProtoJSON parsers do.
    """

    @property
    def number(self) -> int:
        """The proto enum number (0 is always the ``*_UNSPECIFIED`` value)."""
        return type(self)._member_names_.index(self.name)

    @classmethod
    def _missing_(cls, value: object) -> ProtoEnum | None:
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < len(cls):
            return list(cls)[value]
        return None


class Role(ProtoEnum):
    """Who wrote a message."""

    ROLE_UNSPECIFIED = "ROLE_UNSPECIFIED"
    ROLE_USER = "ROLE_USER"
    ROLE_AGENT = "ROLE_AGENT"


class TaskState(ProtoEnum):
    """The life-cycle state of a task (spelled ``CANCELED``, one L, as the proto does)."""

    TASK_STATE_UNSPECIFIED = "TASK_STATE_UNSPECIFIED"
    TASK_STATE_SUBMITTED = "TASK_STATE_SUBMITTED"
    TASK_STATE_WORKING = "TASK_STATE_WORKING"
    TASK_STATE_COMPLETED = "TASK_STATE_COMPLETED"
    TASK_STATE_FAILED = "TASK_STATE_FAILED"
    TASK_STATE_CANCELED = "TASK_STATE_CANCELED"
    TASK_STATE_INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
    TASK_STATE_REJECTED = "TASK_STATE_REJECTED"
    TASK_STATE_AUTH_REQUIRED = "TASK_STATE_AUTH_REQUIRED"

    @property
    def is_terminal(self) -> bool:
        """A terminal task is immutable: no more messages, no cancel, no subscribe."""
        return self in TERMINAL_TASK_STATES

    @property
    def is_interrupted(self) -> bool:
        """The task waits for the client (input or auth); a blocking send returns here."""
        return self in INTERRUPTED_TASK_STATES

    @property
    def is_active(self) -> bool:
        """The agent holds the turn (submitted or working): the client waits for it."""
        return self in ACTIVE_TASK_STATES

    @property
    def is_settled(self) -> bool:
        """The task waits for nobody but the client: terminal or interrupted."""
        return self.is_terminal or self.is_interrupted

    @property
    def word(self) -> str:
        """The state as a person reads it: ``input-required`` for TASK_STATE_INPUT_REQUIRED."""
        return self.value.removeprefix("TASK_STATE_").lower().replace("_", "-")


TERMINAL_TASK_STATES: frozenset[TaskState] = frozenset({
    TaskState.TASK_STATE_COMPLETED,
    TaskState.TASK_STATE_FAILED,
    TaskState.TASK_STATE_CANCELED,
    TaskState.TASK_STATE_REJECTED,
})
"""States after which a task never changes."""

INTERRUPTED_TASK_STATES: frozenset[TaskState] = frozenset({
    TaskState.TASK_STATE_INPUT_REQUIRED,
    TaskState.TASK_STATE_AUTH_REQUIRED,
})
"""States in which the task waits for the client; streams and blocking sends end there too."""

ACTIVE_TASK_STATES: frozenset[TaskState] = frozenset({
    TaskState.TASK_STATE_SUBMITTED,
    TaskState.TASK_STATE_WORKING,
})
"""States in which the agent holds the turn; the client waits for it."""
