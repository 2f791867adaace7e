"""Subscriptions to a task's events: the snapshot first, then every change, in order.

Everything runs on the event loop and a subscription is registered in the same synchronous
step that reads the snapshot, so no event can fall between the two. Each subscriber has its own
unbounded queue: a slow reader delays nobody, and one that goes away only removes its queue.
"""

from __future__ import annotations

import asyncio
from collections import defaultdict
from typing import Any

from anet_core.wire import TaskState

_END = object()


class TaskSubscription:
    """An async iterator of A2A StreamResponse objects (``{"task": ...}``, ``{"statusUpdate":
    ...}``, ``{"artifactUpdate": ...}``) that ends after a terminal state.

    ``snapshot`` is the task as it was when the subscription began (also the first event);
    ``task`` the task as the events published last left it (what a reader that stopped at an
    event would read from the store then). :meth:`close` detaches without touching the task;
    call it when you stop reading before the end. The subscription is its own iterator rather
    than an async generator: a blocking send stops reading at the task's end, and an async
    generator left suspended there is closed later by the event loop, in a task of its own
    (``sys.set_asyncgen_hooks``).
    """

    def __init__(self, broker: TaskEvents, task_id: str, snapshot: dict[str, Any]) -> None:
        self._broker = broker
        self.task_id = task_id
        self.snapshot = self.task = snapshot
        self._queue: asyncio.Queue[object] = asyncio.Queue()
        self._queue.put_nowait({"task": snapshot})
        if TaskState(snapshot["status"]["state"]).is_terminal:
            self._queue.put_nowait(_END)

    def __aiter__(self) -> TaskSubscription:
        return self

    async def __anext__(self) -> dict[str, Any]:
        event = await self._queue.get()
        if event is _END:
            self._queue.put_nowait(_END)  # a later call ends too
            self.close()
            raise StopAsyncIteration
        return event  # type: ignore[return-value]

    def close(self) -> None:
        self._broker.detach(self)

    def put(self, task: dict[str, Any], events: list[dict[str, Any]], *, last: bool) -> None:
        self.task = task
        for event in events:
            self._queue.put_nowait(event)
        if last:
            self._queue.put_nowait(_END)


class TaskEvents:
    """Fan-out of task events to every current subscriber of that task."""

    def __init__(self) -> None:
        self._subscribers: defaultdict[str, set[TaskSubscription]] = defaultdict(set)

    def subscribe(self, task_id: str, snapshot: dict[str, Any]) -> TaskSubscription:
        subscription = TaskSubscription(self, task_id, snapshot)
        if not TaskState(snapshot["status"]["state"]).is_terminal:
            self._subscribers[task_id].add(subscription)
        return subscription

    def detach(self, subscription: TaskSubscription) -> None:
        subscribers = self._subscribers.get(subscription.task_id)
        if subscribers is not None:
            subscribers.discard(subscription)
            if not subscribers:
                del self._subscribers[subscription.task_id]

    def publish(self, task: dict[str, Any], events: list[dict[str, Any]]) -> None:
        """Hand ``events``, which left the task as ``task``, to every subscriber of the task;
        after a terminal state their streams end."""
        terminal = TaskState(task["status"]["state"]).is_terminal
        subscribers = self._subscribers.pop(task["id"], set()) if terminal \
            else self._subscribers.get(task["id"], set())
        for subscription in list(subscribers):
            subscription.put(task, events, last=terminal)
