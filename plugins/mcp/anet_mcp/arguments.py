"""The argument types the tools share: AIDs, task ids, task states, bounded waits.

Each validator names the offending value and where a correct one comes from, because the
message goes back to a language model that has to fix its next call.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field

from anet_core.api import AidError, check_aid
from anet_core.protocol.tasks import TASK_ID_PATTERN
from anet_core.wire import TaskState

MAX_WAIT_S = 600.0
DEFAULT_WAIT_S = 60.0


class Arguments(BaseModel):
    """A tool's arguments: unknown ones are refused, so a misspelt name is never ignored."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True)


def _aid(value: str) -> str:
    try:
        return check_aid(value)
    except AidError as error:
        raise ValueError(f"{error.message}; find_agents lists the agents and their AIDs") \
            from None


def _task_id(value: str) -> str:
    if not TASK_ID_PATTERN.match(value):
        raise ValueError("not a task id (8-64 characters of A-Z, a-z, 0-9, _ and -); "
                         "list_tasks and list_inbox show the ids")
    return value


WORD_STATES = {state.word: state for state in TaskState
               if state is not TaskState.TASK_STATE_UNSPECIFIED}
"""Each A2A task state by the word a person reads (``input-required``), as the CLI prints it."""


def _state_word(value: Any) -> Any:
    """Accept the A2A name (TASK_STATE_COMPLETED) as well as the word."""
    if isinstance(value, str) and value.upper() in TaskState.__members__:
        return TaskState(value.upper()).word
    return value


AidArgument = Annotated[str, AfterValidator(_aid),
                Field(description="an agent's AID, 32 characters of a-z and 2-7")]
TaskIdArgument = Annotated[str, AfterValidator(_task_id), Field(description="a task id")]
StateWord = Annotated[Literal["submitted", "working", "input-required", "auth-required",
                              "completed", "failed", "canceled", "rejected"],
                      BeforeValidator(_state_word)]
WaitSeconds = Annotated[float, Field(gt=0, le=MAX_WAIT_S, description=(
    f"how long to wait at most, in seconds (at most {MAX_WAIT_S:g}); the task goes on after"))]


def state_word(task: dict[str, Any]) -> str:
    """The word of a task's state."""
    return TaskState(task["status"]["state"]).word
