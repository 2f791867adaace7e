"""Tasks at direct peers, behind the same port as the network's agents (``tasks_port``).

The local client sees an ordinary A2A task with this node's ids; behind it, each message goes
to the peer as one JSON-RPC SendMessage (the one method every A2A server answers, ZeroClaw's
only one), and a task the peer has not finished is followed with GetTask. So the local client
gets streaming, ListTasks, SubscribeToTask and the HTTP+JSON binding even from a peer that
offers none of them. A repeated (contextId, messageId) returns its task and is not sent again;
a task id of another agent is no task here.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from anet_a2a.config import PeerConfig
from anet_a2a.peers.client import PeerClient, PeerRpcError, resolve_token
from anet_a2a.peers.discovery import DirectAgent
from anet_a2a.peers.guard import PeerError
from anet_a2a.peers.store import PeerTask, PeerTaskStore
from anet_core.api import TaskEvents, TaskMetadata, TaskSubscription
from anet_core.wire import (
    LIST_TASKS_MAX_PAGE_SIZE,
    A2AError,
    A2AErrorKind,
    Message,
    Task,
    TaskState,
    format_timestamp,
)

log = logging.getLogger(__name__)

REASON = TaskMetadata.REASON
EFFECT_STATUS = TaskMetadata.EFFECT_STATUS
DIRECT_PEER = TaskMetadata.DIRECT_PEER
PEER_ERROR = TaskMetadata.PEER_ERROR
POLL_FIRST_S = 0.5
POLL_MAX_S = 10.0
NOT_SENT = frozenset({"peer-url-invalid", "peer-host-refused", "peer-unresolvable",
                      "peer-token-unresolved", "peer-origin-mismatch"})
"""Failures before anything reached the peer: the task had no effect there."""
_OPEN = {state.value for state in TaskState if not state.is_terminal}
_WAITING = {TaskState.TASK_STATE_SUBMITTED.value, TaskState.TASK_STATE_WORKING.value}


def _now() -> str:
    return format_timestamp(datetime.now(UTC))


def _new_id() -> str:
    return uuid.uuid4().hex


def peer_reason(error: PeerError) -> str:
    """The ``anet.reason`` of a task that failed at a peer: the error's reason, and for a
    JSON-RPC error what the peer refused (ZeroClaw answers -32601 for every method but
    SendMessage, -32602 for an empty message and for a version it does not speak)."""
    if isinstance(error, PeerRpcError):
        failure = error.failure
        if failure.code == A2AErrorKind.VERSION_NOT_SUPPORTED.spec.code \
                or failure.reason == "VERSION_NOT_SUPPORTED":
            return "peer_version_not_supported"
        if failure.code == A2AErrorKind.METHOD_NOT_FOUND.spec.code:
            return "peer_method_not_found"
        if failure.code == A2AErrorKind.INVALID_PARAMS.spec.code:
            return "peer_invalid_params"
        return "peer_rpc_error"
    return error.reason.replace("-", "_")


def _error_details(error: PeerError) -> dict[str, Any]:
    details: dict[str, Any] = {"error": error.reason}
    if isinstance(error, PeerRpcError):
        details["code"] = error.failure.code
        if error.failure.reason:
            details["a2aReason"] = error.failure.reason
    return details


def _events_for(before: list[dict[str, Any]], task: dict[str, Any]) -> list[dict[str, Any]]:
    """The stream events from ``before`` (the artifacts as they were) to ``task``: changed
    artifacts first, then the status, so a client that stops at a terminal state has the
    answer."""
    known = {artifact["artifactId"]: artifact for artifact in before}
    events: list[dict[str, Any]] = [
        {"artifactUpdate": {"taskId": task["id"], "contextId": task["contextId"],
                            "artifact": artifact, "lastChunk": True}}
        for artifact in task.get("artifacts", []) if known.get(artifact["artifactId"]) != artifact]
    metadata = {key: value for key, value in task.get("metadata", {}).items()
                if key.startswith("anet.")}
    events.append({"statusUpdate": {"taskId": task["id"], "contextId": task["contextId"],
                                    "status": task["status"], "metadata": metadata}})
    return events


class DirectTasks:
    """The tasks of every direct peer: store, events, and the calls in flight."""

    def __init__(self, store: PeerTaskStore, client: PeerClient,
                 peers: dict[str, PeerConfig], *, give_up_after_s: float) -> None:
        self.store = store
        self.client = client
        self.peers = peers
        self.events = TaskEvents()
        self.give_up_after_s = give_up_after_s
        self._calls: dict[str, asyncio.Task[None]] = {}

    # --- the port of one agent (see PeerTasks) ---------------------------------------------

    async def send(self, agent: DirectAgent, message: dict[str, Any],
                   metadata: dict[str, Any] | None) -> dict[str, Any]:
        parsed = self._parse(message)
        continued = self._owned(agent, parsed.task_id) if parsed.task_id else None
        if continued is not None and parsed.context_id \
                and parsed.context_id != continued.context_id:
            raise A2AError(A2AErrorKind.INVALID_PARAMS,
                           f"contextId {parsed.context_id!r} is not the context of task "
                           f"{continued.id} ({continued.context_id!r})")
        context_id = continued.context_id if continued else (parsed.context_id or _new_id())
        earlier = self.store.message_task(agent.id, context_id, parsed.message_id)
        if earlier is not None:
            task = self.store.get(earlier)
            assert task is not None  # the key references its task
            return task.task
        local = {key: value for key, value in message.items() if key not in {"taskId"}}
        if continued is None:
            task_id = _new_id()
            local |= {"contextId": context_id, "taskId": task_id}
            now = time.time()
            record = PeerTask(id=task_id, agent=agent.id, context_id=context_id,
                              remote_context_id=None, remote_task_id=None,
                              state=TaskState.TASK_STATE_SUBMITTED.value,
                              task={"id": task_id, "contextId": context_id,
                                    "status": {"state": TaskState.TASK_STATE_SUBMITTED.value,
                                               "timestamp": _now()},
                                    "history": [local],
                                    "metadata": {DIRECT_PEER: agent.peer}},
                              created_at=now, updated_at=now)
            self.store.insert(record, parsed.message_id)
        else:
            state = TaskState(continued.state)
            if not state.is_interrupted:
                raise A2AError(A2AErrorKind.UNSUPPORTED_OPERATION,
                               f"Task {continued.id} is {state.value}, not waiting for input")
            record = continued
            local |= {"contextId": context_id, "taskId": record.id}
            before = list(record.task.get("artifacts", []))
            record.task.setdefault("history", []).append(local)
            record.task["status"] = {"state": TaskState.TASK_STATE_WORKING.value,
                                     "timestamp": _now()}
            record.task.get("metadata", {}).pop(REASON, None)
            record.state = TaskState.TASK_STATE_WORKING.value
            with self.store.transaction():
                self.store.add_message(agent.id, context_id, parsed.message_id, record.id)
                self.store.save(record)
            self.events.publish(record.task, _events_for(before, record.task))
        outgoing = {key: value for key, value in message.items()
                    if key not in {"taskId", "contextId"}}
        outgoing["contextId"] = record.remote_context_id or context_id
        if record.remote_task_id:
            outgoing["taskId"] = record.remote_task_id
        self._start(record.id, self._exchange(agent, record.id, outgoing, metadata))
        return record.task

    def get(self, agent: DirectAgent, task_id: str) -> dict[str, Any]:
        return self._owned(agent, task_id).task

    def list(self, agent: DirectAgent, *, context_id: str | None = None,
             state: TaskState | None = None, since: Any = None, page_size: int = 50,
             page_token: str = "", history_length: int | None = None,
             include_artifacts: bool = False) -> dict[str, Any]:
        if not 1 <= page_size <= LIST_TASKS_MAX_PAGE_SIZE:
            raise A2AError(A2AErrorKind.INVALID_PARAMS, f"page size {page_size} is outside "
                                                        f"1..{LIST_TASKS_MAX_PAGE_SIZE}")
        if history_length is not None and history_length < 0:
            raise A2AError(A2AErrorKind.INVALID_PARAMS,
                           f"history length {history_length} is negative")
        after = since.timestamp() if isinstance(since, datetime) else since
        try:
            page = self.store.page(agent.id, context_id=context_id,
                                   state=state.value if state else None, since=after,
                                   page_size=page_size, page_token=page_token)
        except ValueError as error:
            raise A2AError(A2AErrorKind.INVALID_PARAMS, str(error)) from None
        # The operations trim history and artifacts as the client asked (render_task).
        return {"tasks": [task.task for task in page.tasks],
                "nextPageToken": page.next_page_token, "pageSize": page_size,
                "totalSize": page.total_size}

    async def cancel(self, agent: DirectAgent, task_id: str) -> dict[str, Any]:
        record = self._owned(agent, task_id)
        if TaskState(record.state).is_terminal:
            raise A2AError(A2AErrorKind.TASK_NOT_CANCELABLE,
                           f"Task {task_id} is already {record.state}")
        call = self._calls.pop(task_id, None)
        if call is not None:
            call.cancel()
        if record.remote_task_id:
            try:
                await self.client.rpc(agent.rpc_url, "CancelTask", {"id": record.remote_task_id},
                                      peer=agent.peer, token=self._token(agent))
            except PeerError as error:
                log.info("event=a2a-peer-cancel-failed task=%s peer=%s remote_task=%s detail=%r",
                         task_id, agent.peer, record.remote_task_id, error.message)
        record = self._owned(agent, task_id)
        if not TaskState(record.state).is_terminal:
            self._finish(record, TaskState.TASK_STATE_CANCELED, reason="canceled_by_requester",
                         effect="possible" if record.remote_task_id or call else "none")
        return record.task

    def subscribe(self, agent: DirectAgent, task_id: str) -> TaskSubscription:
        record = self._owned(agent, task_id)
        return self.events.subscribe(record.id, record.task)

    # --- the life of the service --------------------------------------------------------------

    def recover(self, agents: dict[str, DirectAgent]) -> None:
        """At start: follow the open tasks the peer already took (GetTask); the others were
        in flight when the node stopped and fail, saying the peer may have the message."""
        for record in self.store.in_states(_WAITING):
            agent = agents.get(record.agent)
            if agent is not None and record.remote_task_id:
                self._start(record.id, self._follow(agent, record.id))
            else:
                self._finish(record, TaskState.TASK_STATE_FAILED, reason="interrupted",
                             effect="possible",
                             text="The node stopped before the peer answered; the peer may "
                                  "have received the message.")

    async def close(self) -> None:
        calls = list(self._calls.values())
        for call in calls:
            call.cancel()
        if calls:
            await asyncio.wait(calls, timeout=5)

    # --- calls --------------------------------------------------------------------------------

    def _start(self, task_id: str, work: Any) -> None:
        call = asyncio.ensure_future(work)
        self._calls[task_id] = call
        call.add_done_callback(lambda _: self._calls.pop(task_id, None)
                               if self._calls.get(task_id) is call else None)

    def _token(self, agent: DirectAgent) -> str | None:
        return resolve_token(agent.peer, self.peers[agent.peer].token)

    async def _exchange(self, agent: DirectAgent, task_id: str, outgoing: dict[str, Any],
                        metadata: dict[str, Any] | None) -> None:
        params: dict[str, Any] = {"message": outgoing}
        if metadata:
            params["metadata"] = metadata
        try:
            result = await self.client.rpc(agent.rpc_url, "SendMessage", params,
                                           peer=agent.peer, token=self._token(agent))
            if self._apply(task_id, result):
                await self._follow(agent, task_id)
        except PeerError as error:
            self._failed(task_id, agent, error)
        except Exception as error:
            log.exception("event=a2a-peer-call-crashed task=%s peer=%s", task_id, agent.peer)
            self._failed(task_id, agent, PeerError("peer-bad-answer",
                                                   f"{type(error).__name__}: {error}"))

    async def _follow(self, agent: DirectAgent, task_id: str) -> None:
        """Ask the peer for its task until it ends, waits for input, or gives no news for the
        node's ``no_response_after``."""
        deadline = time.monotonic() + self.give_up_after_s
        wait = POLL_FIRST_S
        try:
            while True:
                record = self.store.get(task_id)
                if record is None or record.state not in _WAITING:
                    return
                if time.monotonic() > deadline:
                    self._finish(record, TaskState.TASK_STATE_FAILED, reason="no_response",
                                 effect="possible",
                                 text=f"The peer did not finish the task within "
                                      f"{self.give_up_after_s:g} s.")
                    return
                await asyncio.sleep(wait)
                wait = min(wait * 2, POLL_MAX_S)
                remote = await self.client.rpc(agent.rpc_url, "GetTask",
                                               {"id": record.remote_task_id}, peer=agent.peer,
                                               token=self._token(agent))
                if not self._apply(task_id, {"task": remote}):
                    return
        except PeerError as error:
            self._failed(task_id, agent, error)

    def _apply(self, task_id: str, result: Any) -> bool:
        """Take the peer's answer into the local task; True while the peer still works on it."""
        record = self.store.get(task_id)
        if record is None or TaskState(record.state).is_terminal:
            return False
        before = list(record.task.get("artifacts", []))
        task = record.task
        try:
            if isinstance(result, dict) and "message" in result:
                reply = Message.from_wire(result["message"]).wire()
                reply |= {"contextId": record.context_id, "taskId": record.id}
                task["status"] = {"state": TaskState.TASK_STATE_COMPLETED.value,
                                  "message": reply, "timestamp": _now()}
                task.setdefault("history", []).append(reply)
                task["metadata"][TaskMetadata.MESSAGE_REPLY] = True
            elif isinstance(result, dict) and "task" in result:
                remote = Task.from_wire(result["task"]).wire()
                record.remote_task_id = remote["id"]
                record.remote_context_id = remote.get("contextId") or record.remote_context_id
                status = dict(remote["status"])
                status.setdefault("timestamp", _now())
                if "message" in status:
                    status["message"] = {**status["message"], "contextId": record.context_id,
                                         "taskId": record.id}
                    task.setdefault("history", []).append(status["message"])
                task["status"] = status
                if remote.get("artifacts"):
                    task["artifacts"] = remote["artifacts"]
            else:
                raise ValueError("the result holds neither a task nor a message")
        except (ValidationError, ValueError, KeyError, TypeError) as error:
            reason = error.errors()[0]["msg"] if isinstance(error, ValidationError) else error
            self._failed(task_id, None, PeerError(
                "peer-bad-answer", f"the peer's answer is not an A2A 1.0 result: {reason}"))
            return False
        state = TaskState(task["status"]["state"])
        record.state = state.value
        if state.is_terminal:
            task["metadata"][EFFECT_STATUS] = "done" if state is TaskState.TASK_STATE_COMPLETED \
                else "possible"
        self.store.save(record)
        self.events.publish(task, _events_for(before, task))
        return state.value in _WAITING

    def _failed(self, task_id: str, agent: DirectAgent | None, error: PeerError) -> None:
        record = self.store.get(task_id)
        if record is None or TaskState(record.state).is_terminal:
            return
        log.info("event=a2a-peer-task-failed task=%s peer=%s reason=%s detail=%r", task_id,
                 agent.peer if agent else "?", error.reason, error.message)
        self._finish(record, TaskState.TASK_STATE_FAILED, reason=peer_reason(error),
                     effect="none" if error.reason in NOT_SENT else "possible",
                     text=error.message + (f" ({error.hint})" if error.hint else ""),
                     details=_error_details(error))

    def _finish(self, record: PeerTask, state: TaskState, *, reason: str, effect: str,
                text: str | None = None, details: dict[str, Any] | None = None) -> None:
        before = list(record.task.get("artifacts", []))
        status: dict[str, Any] = {"state": state.value, "timestamp": _now()}
        if text:
            status["message"] = {"messageId": _new_id(), "role": "ROLE_AGENT",
                                 "contextId": record.context_id, "taskId": record.id,
                                 "parts": [{"text": text}]}
            record.task.setdefault("history", []).append(status["message"])
        record.task["status"] = status
        metadata = record.task.setdefault("metadata", {})
        metadata |= {REASON: reason, EFFECT_STATUS: effect}
        if details:
            metadata[PEER_ERROR] = details
        record.state = state.value
        self.store.save(record)
        self.events.publish(record.task, _events_for(before, record.task))

    # --- checks -------------------------------------------------------------------------------

    def _owned(self, agent: DirectAgent, task_id: str) -> PeerTask:
        record = self.store.get(task_id, agent.id)
        if record is None:
            raise A2AError(A2AErrorKind.TASK_NOT_FOUND,
                           f"Task {task_id[:80]!r} is not a task of {agent.id}")
        return record

    @staticmethod
    def _parse(message: dict[str, Any]) -> Message:
        try:
            parsed = Message.from_wire(message)
        except ValidationError as error:
            raise A2AError(A2AErrorKind.INVALID_PARAMS,
                           f"the message is invalid: {error.errors()[0]['msg']}") from None
        if parsed.role.value != "ROLE_USER":
            raise A2AError(A2AErrorKind.INVALID_PARAMS,
                           f"a message sent to an agent has role ROLE_USER, not "
                           f"{parsed.role.value}")
        return parsed


@dataclass(frozen=True)
class PeerTasks:
    """The tasks of one direct agent: the port the operations use, like ``AgentTasks``."""

    agent: DirectAgent
    tasks: DirectTasks

    async def send(self, message: dict[str, Any], metadata: dict[str, Any] | None = None, *,
                   blocking: bool = False) -> dict[str, Any]:
        # ``blocking`` is not passed on: a direct agent's task is followed while it runs.
        return await self.tasks.send(self.agent, message, metadata)

    def get(self, task_id: str) -> dict[str, Any]:
        return self.tasks.get(self.agent, task_id)

    def list(self, **query: Any) -> dict[str, Any]:
        return self.tasks.list(self.agent, **query)

    async def cancel(self, task_id: str) -> dict[str, Any]:
        return await self.tasks.cancel(self.agent, task_id)

    def subscribe(self, task_id: str) -> TaskSubscription:
        return self.tasks.subscribe(self.agent, task_id)
