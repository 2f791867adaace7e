"""The A2A operations of one remote agent, independent of the binding that carried them.

Every task operation goes to the task layer with the AID from the path, so a client holding one
agent's URL reaches that agent's tasks and no others. Results are rendered here: history
trimmed to ``historyLength``, artifacts left out of ListTasks unless asked for, and preview
artifacts only on streams whose client activated the preview extension.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncGenerator, AsyncIterator
from dataclasses import dataclass
from typing import Any

from anet_a2a.card import PREVIEW_EXTENSION
from anet_a2a.tasks_port import TasksPort
from anet_core.api import Reason, TaskMetadata, TaskSubscription
from anet_core.wire import (
    A2AError,
    A2AErrorKind,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    SendMessageRequest,
    SendMessageResponse,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)

FIRST_EVENT_HOLD_S = 1.0
"""A send's stream waits this long for the agent to show how it answers before its first
event: an agent that answers at once with a Message gets a stream of that one message event,
as A2A wants; one that works longer is streamed as the task it is (the proxy must not keep a
client without a first event)."""
FILE_BYTES_OMITTED = "anet.file_bytes"
"""Part metadata of a file part whose bytes a stream left out (value ``omitted``)."""


def _is_preview(artifact: dict[str, Any]) -> bool:
    return PREVIEW_EXTENSION in artifact.get("extensions", ())


WAITING_NOTE = ("Waiting for the remote agent's operator: a person answers this task, no agent "
                "does by itself.")


def with_waiting_note(body: dict[str, Any]) -> dict[str, Any]:
    """A task or status update that waits for the remote operator, given a status message a
    person can read when it has none: a client that shows only text (Hermes) would show nothing
    for a bare submitted state. Rendered for the client, never stored."""
    if "message" in body["status"] or not waits_for_operator(body):
        return body
    task_id = body.get("id") or body.get("taskId") or ""
    note = {"messageId": f"anet-waiting-{task_id}", "contextId": body.get("contextId", ""),
            "taskId": task_id, "role": "ROLE_AGENT", "parts": [{"text": WAITING_NOTE}]}
    return {**body, "status": {**body["status"], "message": note}}


def render_task(task: dict[str, Any], *, history_length: int | None,
                include_artifacts: bool = True) -> Task:
    """A stored task as a client sees it: never a preview, history trimmed to the newest N."""
    shown = with_waiting_note(dict(task))
    artifacts = [artifact for artifact in task.get("artifacts", []) if not _is_preview(artifact)]
    shown["artifacts"] = artifacts if include_artifacts else []
    if history_length is not None:
        history = task.get("history", [])
        shown["history"] = history[len(history) - history_length:] if history_length else []
    return Task.from_wire(shown)


def message_reply(task: dict[str, Any]) -> dict[str, Any] | None:
    """The agent's Message when it answered with one instead of a task, else None. The task is
    this node's record of the exchange; the Message the client gets names no task."""
    status = task.get("status", {})
    if not task.get("metadata", {}).get(TaskMetadata.MESSAGE_REPLY) or "message" not in status \
            or status.get("state") != TaskState.TASK_STATE_COMPLETED.value:
        return None
    return {key: value for key, value in status["message"].items() if key != "taskId"}


def waits_for_operator(task_or_update: dict[str, Any]) -> bool:
    """The task waits in the remote operator's inbox: no agent will answer it by itself, so a
    send does not wait for it (GetTask, SubscribeToTask and ListTasks follow it later)."""
    reason = task_or_update.get("metadata", {}).get(TaskMetadata.REASON)
    return (reason == Reason.QUEUED_FOR_OPERATOR
            and not TaskState(task_or_update["status"]["state"]).is_terminal)


def _file_metadata(part: dict[str, Any]) -> dict[str, Any]:
    """A file part with its bytes replaced by what describes them: mediaType, filename, size."""
    raw = part["raw"]
    described: dict[str, Any] = {"size": len(raw.rstrip("=")) * 3 // 4 if isinstance(raw, str)
                                 else 0}
    for key in ("mediaType", "filename"):
        if part.get(key):
            described[key] = part[key]
    out: dict[str, Any] = {"data": described,
                           "metadata": {**(part.get("metadata") or {}),
                                        FILE_BYTES_OMITTED: "omitted"}}
    if part.get("filename"):
        out["filename"] = part["filename"]
    return out


def without_file_bytes(value: Any) -> Any:
    """``value`` (stream event JSON) with every ``raw`` part replaced by its file metadata."""
    if isinstance(value, list):
        return [without_file_bytes(item) for item in value]
    if not isinstance(value, dict):
        return value
    out = {}
    for key, item in value.items():
        if key == "parts" and isinstance(item, list):
            out[key] = [_file_metadata(part) if isinstance(part, dict) and "raw" in part
                        else part for part in item]
        elif key in {"data", "metadata"}:
            out[key] = item  # opaque JSON: nothing in it is a part
        else:
            out[key] = without_file_bytes(item)
    return out


def _state_of(event: dict[str, Any]) -> TaskState | None:
    if "statusUpdate" in event:
        return TaskState(event["statusUpdate"]["status"]["state"])
    if "task" in event:
        return TaskState(event["task"]["status"]["state"])
    return None


def _body(event: dict[str, Any]) -> dict[str, Any] | None:
    """The task or status update an event carries (both have ``status`` and ``metadata``)."""
    return event.get("task") or event.get("statusUpdate")


def _bare_progress(event: dict[str, Any]) -> bool:
    """The event says only that the task exists or is worked on: not yet how the agent
    answers."""
    body = _body(event)
    if body is None:
        return False
    status = body["status"]
    return (TaskState(status["state"]) in {TaskState.TASK_STATE_SUBMITTED,
                                           TaskState.TASK_STATE_WORKING}
            and "message" not in status and not body.get("artifacts")
            and not body.get("metadata", {}).get(TaskMetadata.REASON))


_TIMED_OUT = object()
_END = object()


@dataclass
class EventStream:
    """The events of one stream, already checked: iterate to get StreamResponse objects.

    A send's stream (``send``) ends at input-required, auth-required and when the task waits
    for the remote operator too, and holds its first event up to :data:`FIRST_EVENT_HOLD_S`
    to learn whether the agent answers with a Message; a subscription stays open until the
    task ends. File bytes never travel in a stream (GetTask has them).
    """

    subscription: TaskSubscription
    previews: bool
    history_length: int | None
    send: bool
    hold_first_s: float = 0.0

    def _render(self, event: dict[str, Any]) -> StreamResponse | None:
        if "artifactUpdate" in event and not self.previews and _is_preview(
                event["artifactUpdate"]["artifact"]):
            return None
        if "task" in event:
            task = render_task(event["task"], history_length=self.history_length,
                               include_artifacts=True)
            return StreamResponse.from_wire(without_file_bytes({"task": task.wire()}))
        if "statusUpdate" in event:
            event = {"statusUpdate": with_waiting_note(event["statusUpdate"])}
        return StreamResponse.from_wire(without_file_bytes(event))

    def _ends(self, event: dict[str, Any]) -> bool:
        state = _state_of(event)
        if state is None:
            return False
        if state.is_terminal:
            return True
        body = _body(event)
        return self.send and (state.is_interrupted or (body is not None
                                                       and waits_for_operator(body)))

    async def until_end(self) -> dict[str, Any]:
        """Follow the task until this stream would end, rendering nothing; return the task as
        it is then (a blocking send answers with it)."""
        try:
            async for event in self.subscription:
                if self._ends(event):
                    break
        finally:
            self.subscription.close()
        return self.subscription.task

    async def events(self) -> AsyncGenerator[StreamResponse, None]:
        source = aiter(self.subscription)
        pending: asyncio.Future[dict[str, Any]] | None = None

        async def next_event(timeout: float | None) -> Any:
            nonlocal pending
            if pending is None:
                pending = asyncio.ensure_future(_next(source))
            done, _ = await asyncio.wait({pending}, timeout=timeout)
            if not done:
                return _TIMED_OUT  # the read stays pending for the next call
            finished, pending = pending, None
            return finished.result()

        try:
            held: list[dict[str, Any]] = []
            if self.hold_first_s > 0:
                deadline = asyncio.get_running_loop().time() + self.hold_first_s
                while True:
                    left = deadline - asyncio.get_running_loop().time()
                    event = await next_event(max(left, 0.0))
                    if event is _TIMED_OUT or event is _END:
                        break
                    body = _body(event)
                    reply = message_reply(body) if body is not None and "task" in event \
                        else _reply_of_update(event)
                    if reply is not None:
                        yield StreamResponse(message=Message.from_wire(
                            without_file_bytes(reply)))
                        return
                    held.append(event)
                    if not _bare_progress(event):
                        break
            for event in held:
                rendered = self._render(event)
                if rendered is not None:
                    yield rendered
                if self._ends(event):
                    return
            while (event := await next_event(None)) is not _END:
                rendered = self._render(event)
                if rendered is not None:
                    yield rendered
                if self._ends(event):
                    return
        finally:
            if pending is not None:
                pending.cancel()
            # A client that went away detaches; the task itself goes on.
            self.subscription.close()


def _reply_of_update(event: dict[str, Any]) -> dict[str, Any] | None:
    update = event.get("statusUpdate")
    return None if update is None else message_reply(update)


async def _next(source: AsyncIterator[dict[str, Any]]) -> Any:
    """The next event, or _END after the last (a future cannot carry StopAsyncIteration
    out of an async generator)."""
    try:
        return await anext(source)
    except StopAsyncIteration:
        return _END


@dataclass(frozen=True)
class AgentOperations:
    """The operations of one agent for one request (a network agent, a direct peer's or a
    published alias, by its port); ``extensions`` are the URIs the client's request activated
    (A2A-Extensions)."""

    tasks: TasksPort
    extensions: frozenset[str]

    async def _send(self, request: SendMessageRequest, *, blocking: bool = False
                    ) -> dict[str, Any]:
        # Shielded: a client that disconnects mid-send must not cut the task layer off between
        # storing the task and queueing its message. The task layer refuses a send while the
        # node is not registered, before it creates anything.
        return await asyncio.shield(self.tasks.send(self._message(request),
                                                    metadata=request.metadata,
                                                    blocking=blocking))

    def _message(self, request: SendMessageRequest) -> dict[str, Any]:
        """The client's message, its ``extensions`` joined by those the request activated: what
        acts on the task later (a module's requester hooks) knows what the client speaks."""
        message = request.message.wire()
        if self.extensions:
            listed = list(message.get("extensions", []))
            message["extensions"] = listed + sorted(self.extensions - set(listed))
        return message

    async def send_message(self, request: SendMessageRequest) -> SendMessageResponse:
        """The task once it is terminal or interrupted (or waits for the remote operator),
        at once with ``returnImmediately``; the agent's Message when it answered with one."""
        config = request.configuration
        blocking = not (config and config.return_immediately)
        # A blocking call shows its client the end alone: the agent need not report progress.
        task = await self._send(request, blocking=blocking)
        state = TaskState(task["status"]["state"])
        if blocking and not (
                state.is_terminal or state.is_interrupted or waits_for_operator(task)):
            stream = EventStream(self.tasks.subscribe(task["id"]), previews=False,
                                 history_length=None, send=True)
            task = await stream.until_end()
        reply = message_reply(task)
        if reply is not None:
            return SendMessageResponse(message=Message.from_wire(reply))
        return SendMessageResponse(task=render_task(
            task, history_length=config.history_length if config else None))

    async def send_streaming_message(self, request: SendMessageRequest) -> EventStream:
        task = await self._send(request)
        config = request.configuration
        return EventStream(self.tasks.subscribe(task["id"]),
                           previews=PREVIEW_EXTENSION in self.extensions,
                           history_length=config.history_length if config else None,
                           send=True, hold_first_s=FIRST_EVENT_HOLD_S)

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
            tasks=[render_task(task, history_length=request.history_length,
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
                           history_length=None, send=False)

