"""Parameters and results of the A2A 1.0 operations other than the core objects themselves.

Range checks that the SDK server makes (``historyLength`` ≥ 0, ``pageSize`` 1–100 for ListTasks)
are part of the models, so a bad value is an InvalidParams that names the field and the value.
"""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from anet_core.wire._base import JsonObject, Timestamp, WireModel
from anet_core.wire.enums import TaskState
from anet_core.wire.messages import Message, Task

INT32_MAX = 2**31 - 1

HistoryLength = Annotated[int, Field(ge=0, le=INT32_MAX)]
"""How many of the most recent history messages to return; 0 means none, unset means all."""

LIST_TASKS_DEFAULT_PAGE_SIZE = 50
LIST_TASKS_MAX_PAGE_SIZE = 100

# --- push-notification configuration -------------------------------------------------------------


class AuthenticationInfo(WireModel):
    """How the server authenticates to a push webhook: ``Authorization: <scheme> <credentials>``."""

    scheme: str = Field(min_length=1)
    credentials: str = ""


class TaskPushNotificationConfig(WireModel):
    """A webhook for a task's events (flat in 1.0). Also the params of the Create method.

    ``taskId`` is empty when the config travels inside ``SendMessageConfiguration``.
    """

    tenant: str = ""
    id: str = ""
    task_id: str = ""
    url: str = Field(min_length=1)
    token: str = ""
    authentication: AuthenticationInfo | None = None


class GetTaskPushNotificationConfigRequest(WireModel):
    """Params of GetTaskPushNotificationConfig."""

    tenant: str = ""
    task_id: str = Field(min_length=1)
    id: str = ""


class DeleteTaskPushNotificationConfigRequest(WireModel):
    """Params of DeleteTaskPushNotificationConfig."""

    tenant: str = ""
    task_id: str = Field(min_length=1)
    id: str = ""


class ListTaskPushNotificationConfigsRequest(WireModel):
    """Params of ListTaskPushNotificationConfigs (``pageSize`` is a plain int32 here)."""

    tenant: str = ""
    task_id: str = Field(min_length=1)
    page_size: int = Field(default=0, ge=0, le=INT32_MAX)
    page_token: str = ""


class ListTaskPushNotificationConfigsResponse(WireModel):
    """Result of ListTaskPushNotificationConfigs."""

    configs: list[TaskPushNotificationConfig] = Field(default_factory=list)
    next_page_token: str = ""


# --- messages ------------------------------------------------------------------------------------


class SendMessageConfiguration(WireModel):
    """How the client wants a send handled. The SDK always sends it, often as ``{}``."""

    accepted_output_modes: list[str] = Field(default_factory=list)
    task_push_notification_config: TaskPushNotificationConfig | None = None
    history_length: HistoryLength | None = None
    return_immediately: bool = False
    """False (the default) blocks until the task is terminal or interrupted (0.3 ``blocking``
    inverted)."""


class SendMessageRequest(WireModel):
    """Params of SendMessage and SendStreamingMessage."""

    tenant: str = ""
    message: Message
    configuration: SendMessageConfiguration | None = None
    metadata: JsonObject | None = None


# --- tasks ---------------------------------------------------------------------------------------


class GetTaskRequest(WireModel):
    """Params of GetTask."""

    tenant: str = ""
    id: str = Field(min_length=1)
    history_length: HistoryLength | None = None


class ListTasksRequest(WireModel):
    """Params of ListTasks; the state filter is called ``status``, not ``state``."""

    tenant: str = ""
    context_id: str = ""
    status: TaskState = TaskState.TASK_STATE_UNSPECIFIED
    page_size: int | None = Field(default=None, ge=1, le=LIST_TASKS_MAX_PAGE_SIZE)
    page_token: str = ""
    history_length: HistoryLength | None = None
    status_timestamp_after: Timestamp | None = None
    include_artifacts: bool | None = None

    @property
    def effective_page_size(self) -> int:
        """The page size to use: the requested one, or the protocol default of 50."""
        return self.page_size if self.page_size is not None else LIST_TASKS_DEFAULT_PAGE_SIZE


class ListTasksResponse(WireModel):
    """Result of ListTasks. All four keys are always written, ``"tasks": []`` and
    ``"nextPageToken": ""`` included (the last page has an empty token)."""

    ALWAYS_EMITTED = frozenset({"tasks", "next_page_token", "page_size", "total_size"})

    tasks: list[Task] = Field(default_factory=list)
    next_page_token: str = ""
    page_size: int = 0
    total_size: int = 0


class CancelTaskRequest(WireModel):
    """Params of CancelTask."""

    tenant: str = ""
    id: str = Field(min_length=1)
    metadata: JsonObject | None = None


class SubscribeToTaskRequest(WireModel):
    """Params of SubscribeToTask."""

    tenant: str = ""
    id: str = Field(min_length=1)


class GetExtendedAgentCardRequest(WireModel):
    """Params of GetExtendedAgentCard (``{}`` or absent)."""

    tenant: str = ""
