"""What both example executors do at the start of a turn, where the SDK needs care."""

from __future__ import annotations

from a2a.server.agent_execution import RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Task, TaskState, TaskStatus


async def open_task(context: RequestContext, event_queue: EventQueue) -> TaskUpdater:
    """The updater for this turn's task, announcing the task first when the turn starts it.

    The SDK wants the Task itself before any status update of a new task. And for a follow-up
    that names only the taskId, RequestContext invents a fresh contextId; events must carry the
    task's own, or the SDK refuses them from the next turn on.
    """
    assert context.task_id is not None and context.context_id is not None
    assert context.message is not None
    task = context.current_task
    if task is None:
        await event_queue.enqueue_event(Task(
            id=context.task_id, context_id=context.context_id,
            status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED), history=[context.message]))
        return TaskUpdater(event_queue, context.task_id, context.context_id)
    return TaskUpdater(event_queue, task.id, task.context_id)
