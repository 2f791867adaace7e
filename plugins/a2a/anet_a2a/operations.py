"""The A2A operations of one remote agent, independent of the binding that carried them.

Every task operation goes to the task layer with the AID from the path, so a client holding one
agent's URL reaches that agent's tasks and no others. Results are rendered here: history
trimmed to ``historyLength``, artifacts left out of ListTasks unless asked for, and preview
artifacts only on streams whose client activated the preview extension.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

from anet_core.tasks import TaskSubscription
from anet_core.wire import (
    A2AError,
    A2AErrorKind,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)

from anet_a2a.card import PREVIEW_EXTENSION
from anet_a2a.tasks_port import AgentTasks


def _is_preview(artifact: dict[str, Any]) -> bool:
    return PREVIEW_EXTENSION in artifact.get("extensions", ())


def render_task(task: dict[str, Any], *, history_length: int | None,
                include_artifacts: bool = True) -> Task:
    """A stored task as a client sees it: never a preview, history trimmed to the newest N."""
    shown = dict(task)
    artifacts = [artifact for artifact in task.get("artifacts", []) if not _is_preview(artifact)]
    shown["artifacts"] = artifacts if include_artifacts else []
    if history_length is not None:
        history = task.get("history", [])
        shown["history"] = history[len(history) - history_length:] if history_length else []
    return Task.from_wire(shown)


def _state_of(event: dict[str, Any]) -> TaskState | None:
    if "statusUpdate" in event:
        return TaskState(event["statusUpdate"]["status"]["state"])
    if "task" in event:
        return TaskState(event["task"]["status"]["state"])
    return None


@dataclass
class EventStream:
    """The events of one stream, already checked: iterate to get StreamResponse objects.

    ``until_interrupted`` ends the stream at input-required and auth-required too (a send's
    stream); a subscription stays open there until the task ends.
    """

    subscription: TaskSubscription
    previews: bool
    history_length: int | None
    until_interrupted: bool

    async def events(self) -> AsyncIterator[StreamResponse]:
        try:
            async for event in self.subscription:
                if "artifactUpdate" in event and not self.previews and _is_preview(
                        event["artifactUpdate"]["artifact"]):
                    continue
                if "task" in event:
                    yield StreamResponse(task=render_task(
                        event["task"], history_length=self.history_length,
                        include_artifacts=True))
                else:
                    yield StreamResponse.from_wire(event)
                state = _state_of(event)
                if state is not None and (state.is_terminal or (
                        self.until_interrupted and state.is_interrupted)):
                    return
        finally:
            # A client that went away detaches; the task itself goes on.
            self.subscription.close()


@dataclass(frozen=True)
class AgentOperations:
    """The operations of one remote agent for one request; ``extensions`` are the URIs the
    client requested in A2A-Extensions."""

    tasks: AgentTasks
    extensions: frozenset[str]

    async def _send(self, request: SendMessageRequest) -> dict[str, Any]:
        # Shielded: a client that disconnects mid-send must not cut the task layer off between
        # storing the task and queueing its message. The task layer refuses a send while the
        # node is not registered, before it creates anything.
        return await asyncio.shield(self.tasks.send(request.message.wire()))

    async def send_message(self, request: SendMessageRequest) -> SendMessageResponse:
        config = request.configuration
        task = await self._send(request)
        state = TaskState(task["status"]["state"])
        if not (config and config.return_immediately) and not (
                state.is_terminal or state.is_interrupted):
            stream = EventStream(self.tasks.subscribe(task["id"]), previews=False,
                                 history_length=None, until_interrupted=True)
            async for _ in stream.events():
                pass
            task = self.tasks.get(task["id"])
        return SendMessageResponse(task=render_task(
            task, history_length=config.history_length if config else None))

    async def send_streaming_message(self, request: SendMessageRequest) -> EventStream:
        task = await self._send(request)
        config = request.configuration
        return EventStream(self.tasks.subscribe(task["id"]),
                           previews=PREVIEW_EXTENSION in self.extensions,
                           history_length=config.history_length if config else None,
                           until_interrupted=True)

    def get_task(self, request: GetTaskRequest) -> Task:
        return render_task(self.tasks.get(request.id), history_length=request.history_length)

    def list_tasks(self, request: ListTasksRequest) -> ListTasksResponse:
        state = None if request.status is TaskState.TASK_STATE_UNSPECIFIED else request.status
        page = self.tasks.list(
            context_id=request.context_id or None, state=state,
            since=request.status_timestamp_after, page_size=request.effective_page_size,
            page_token=request.page_token, history_length=request.history_length,
            include_artifacts=bool(request.include_artifacts))
        return ListTasksResponse(
            tasks=[render_task(task, history_length=None,
                               include_artifacts=bool(request.include_artifacts))
                   for task in page["tasks"]],
            next_page_token=page["nextPageToken"], page_size=request.effective_page_size,
            total_size=page["totalSize"])

    async def cancel_task(self, request: CancelTaskRequest) -> Task:
        return render_task(await self.tasks.cancel(request.id), history_length=None)

    def subscribe_to_task(self, request: SubscribeToTaskRequest) -> EventStream:
        subscription = self.tasks.subscribe(request.id)
        state = subscription.snapshot["status"]["state"]
        if TaskState(state).is_terminal:
            subscription.close()
            raise A2AError(A2AErrorKind.UNSUPPORTED_OPERATION,
                           f"Task {request.id} is in terminal state {state}: there is nothing "
                           "to subscribe to")
        return EventStream(subscription, previews=PREVIEW_EXTENSION in self.extensions,
                           history_length=None, until_interrupted=False)
