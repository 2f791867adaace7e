"""The eleven A2A 1.0 operations in one table: method name, params model, result model."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from anet_core.wire._base import WireModel
from anet_core.wire.card import AgentCard
from anet_core.wire.messages import SendMessageResponse, StreamResponse, Task
from anet_core.wire.requests import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTaskPushNotificationConfigsResponse,
    ListTasksRequest,
    ListTasksResponse,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskPushNotificationConfig,
)


class A2AMethod(StrEnum):
    """A2A 1.0 JSON-RPC method names (PascalCase; the 0.3 ``message/send`` names are gone)."""

    SEND_MESSAGE = "SendMessage"
    SEND_STREAMING_MESSAGE = "SendStreamingMessage"
    GET_TASK = "GetTask"
    LIST_TASKS = "ListTasks"
    CANCEL_TASK = "CancelTask"
    SUBSCRIBE_TO_TASK = "SubscribeToTask"
    CREATE_TASK_PUSH_NOTIFICATION_CONFIG = "CreateTaskPushNotificationConfig"
    GET_TASK_PUSH_NOTIFICATION_CONFIG = "GetTaskPushNotificationConfig"
    LIST_TASK_PUSH_NOTIFICATION_CONFIGS = "ListTaskPushNotificationConfigs"
    DELETE_TASK_PUSH_NOTIFICATION_CONFIG = "DeleteTaskPushNotificationConfig"
    GET_EXTENDED_AGENT_CARD = "GetExtendedAgentCard"


@dataclass(frozen=True, slots=True)
class MethodSpec:
    """What one operation takes and gives."""

    method: A2AMethod
    params_model: type[WireModel]
    result_model: type[WireModel] | None
    """The result type; for streaming methods the type of each event. None: ``"result": null``."""
    streaming: bool = False
    """Answered with server-sent events (an error before the first event is a plain body)."""
    push_config: bool = False
    """One of the four push-notification config operations."""


_M = A2AMethod
_ALL_METHODS = (
    MethodSpec(_M.SEND_MESSAGE, SendMessageRequest, SendMessageResponse),
    MethodSpec(_M.SEND_STREAMING_MESSAGE, SendMessageRequest, StreamResponse, streaming=True),
    MethodSpec(_M.GET_TASK, GetTaskRequest, Task),
    MethodSpec(_M.LIST_TASKS, ListTasksRequest, ListTasksResponse),
    MethodSpec(_M.CANCEL_TASK, CancelTaskRequest, Task),
    MethodSpec(_M.SUBSCRIBE_TO_TASK, SubscribeToTaskRequest, StreamResponse, streaming=True),
    MethodSpec(_M.CREATE_TASK_PUSH_NOTIFICATION_CONFIG, TaskPushNotificationConfig,
               TaskPushNotificationConfig, push_config=True),
    MethodSpec(_M.GET_TASK_PUSH_NOTIFICATION_CONFIG, GetTaskPushNotificationConfigRequest,
               TaskPushNotificationConfig, push_config=True),
    MethodSpec(_M.LIST_TASK_PUSH_NOTIFICATION_CONFIGS, ListTaskPushNotificationConfigsRequest,
               ListTaskPushNotificationConfigsResponse, push_config=True),
    MethodSpec(_M.DELETE_TASK_PUSH_NOTIFICATION_CONFIG, DeleteTaskPushNotificationConfigRequest,
               None, push_config=True),
    MethodSpec(_M.GET_EXTENDED_AGENT_CARD, GetExtendedAgentCardRequest, AgentCard),
)

METHODS: Mapping[A2AMethod, MethodSpec] = MappingProxyType(
    {spec.method: spec for spec in _ALL_METHODS})
"""Every A2A 1.0 method, in the order of the spec's table."""
