"""Tasks that reach the provider side without the network: a module's own surface hands them in.

The a2a module's published aliases are such a surface: a caller authenticated by a token of the
operator's sends a task to this node's agent. It goes through the same provider pipeline as a
task from a network peer: stored, offered to the modules (``anet_take_task``: the backends
module forwards it) or left in the operator's inbox, recorded in the evidence chain, answered
through a responder or ``anet reply``. Only the way back differs: no envelope is sealed for a
local caller; every change is published to the task's subscribers (:meth:`LocalTasks.subscribe`).

A local caller is stored as the peer ``local:<module>:<principal>``, which is never an AID; it
counts as trusted (the module authenticated it on the operator's behalf), and the inbound policy
``closed`` rejects its tasks as it rejects everyone's. A caller reaches its own tasks and no
others: another principal's task id is no task.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import ValidationError

from anet_core.protocol.tasks import TaskCancel, TaskMessage
from anet_core.store import Store, StoredTask, TaskRole
from anet_core.tasks.common import (
    Services,
    TaskError,
    TaskNotCancelable,
    new_id,
    parse_client_message,
    state_of,
)
from anet_core.tasks.events import TaskEvents, TaskSubscription
from anet_core.tasks.listing import task_page
from anet_core.tasks.origin import LocalOrigin
from anet_core.tasks.provider import Provider
from anet_core.wire import TaskState


class LocalTasks:
    """The tasks one local caller sent to this node, with the requester API's shape."""

    def __init__(self, origin: LocalOrigin, provider: Provider, store: Store, events: TaskEvents,
                 services: Services) -> None:
        self.origin = origin
        self._provider = provider
        self._store = store
        self._events = events
        self._services = services

    async def send(self, message: dict[str, Any], *, metadata: dict[str, Any] | None = None,
                   skill: str | None = None, offer: bool = True,
                   blocking: bool = False) -> dict[str, Any]:
        """A new task, or the caller's answer on its task that waits for input; a repeated
        (contextId, messageId) returns its task and changes nothing. ``skill`` picks who serves
        it (as a network task's skill does); ``offer`` False leaves it in the inbox;
        ``blocking`` as for a network task (``InboundTask.blocking``)."""
        parsed = parse_client_message(message)
        continued = self._task(parsed.task_id) if parsed.task_id else None
        if continued is not None:
            if parsed.context_id and parsed.context_id != continued.context_id:
                raise TaskError("invalid-message",
                                f"contextId {parsed.context_id!r} is not the context of task "
                                f"{continued.id} ({continued.context_id!r})",
                                hint="leave contextId out or give the task's own")
        context_id = continued.context_id if continued else (parsed.context_id or new_id())
        earlier = self._store.message_task(TaskRole.PROVIDER, self.origin.peer, context_id,
                                           parsed.message_id)
        if earlier is not None:
            return self._task(earlier).task
        if continued is not None and not state_of(continued.task).is_interrupted:
            raise TaskError("task-not-waiting" if not state_of(continued.task).is_terminal
                            else "task-terminal",
                            f"task {continued.id} is {continued.state}, not waiting for input")
        task_id = continued.id if continued else new_id()
        try:
            body = TaskMessage(task_id=task_id, context_id=context_id, skill=skill,
                               metadata=metadata, blocking=blocking or None,
                               message={**message, "contextId": context_id, "taskId": task_id})
        except ValidationError as error:
            first = error.errors()[0]
            raise TaskError("invalid-message", f"{'.'.join(map(str, first['loc']))}: "
                                               f"{first['msg']}") from None
        with self._store.transaction(durable=False):
            effects = self._provider.on_message(self.origin.peer, body, offer=offer,
                                                origin=self.origin.metadata)
            self._services.keep(effects)
        await self._services.run(effects)
        return self._task(task_id).task

    def get(self, task_id: str) -> dict[str, Any]:
        return self._task(task_id).task

    def list(self, *, context_id: str | None = None, state: TaskState | str | None = None,
             since: datetime | str | float | None = None, page_size: int = 50,
             page_token: str = "", history_length: int | None = None,
             include_artifacts: bool = False) -> dict[str, Any]:
        """A2A ListTasksResponse of the caller's tasks, newest first."""
        return task_page(self._store, TaskRole.PROVIDER, self.origin.peer,
                         context_id=context_id, state=state, since=since, page_size=page_size,
                         page_token=page_token, history_length=history_length,
                         include_artifacts=include_artifacts)

    async def cancel(self, task_id: str) -> dict[str, Any]:
        stored = self._task(task_id)
        if state_of(stored.task).is_terminal:
            raise TaskNotCancelable("task-not-cancelable", f"task {task_id} has already ended")
        with self._store.transaction(durable=False):
            effects = self._provider.on_cancel(self.origin.peer, TaskCancel(
                task_id=task_id, context_id=stored.context_id))
            self._services.keep(effects)
        await self._services.run(effects)
        return self._task(task_id).task

    def subscribe(self, task_id: str) -> TaskSubscription:
        """The task now, then every change, ending after a terminal state."""
        stored = self._task(task_id)
        return self._events.subscribe(task_id, stored.task)

    def _task(self, task_id: str) -> StoredTask:
        stored = self._store.get_task(task_id, role=TaskRole.PROVIDER, peer_aid=self.origin.peer)
        if stored is None:
            raise TaskError("task-not-found", f"no task {task_id[:80]!r} was sent by this caller")
        return stored
