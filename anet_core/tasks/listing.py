"""A2A ListTasks over the store: one page of one side's tasks, newest first.

The requester side lists the tasks this node sent (``Requester.list``); a local caller lists the
tasks it handed in (``LocalTasks.list``), which the provider side keeps.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from anet_core.store import Store, TaskRole
from anet_core.tasks.common import TaskError
from anet_core.wire import LIST_TASKS_MAX_PAGE_SIZE, TaskState, parse_timestamp


def task_page(store: Store, role: TaskRole, peer_aid: str | None, *, context_id: str | None,
              state: TaskState | str | None, since: datetime | str | float | None,
              page_size: int, page_token: str, history_length: int | None,
              include_artifacts: bool) -> dict[str, Any]:
    """A2A ListTasksResponse of the tasks of one side with ``peer_aid`` (all peers when None),
    newest first."""
    if not 1 <= page_size <= LIST_TASKS_MAX_PAGE_SIZE:
        raise TaskError("invalid-params", f"page size {page_size} is outside "
                                          f"1..{LIST_TASKS_MAX_PAGE_SIZE}")
    if history_length is not None and history_length < 0:
        raise TaskError("invalid-params", f"history length {history_length} is negative")
    try:
        page = store.list_tasks(
            role, peer_aid=peer_aid, context_id=context_id,
            state=TaskState(state).value if state else None,
            updated_since=_epoch(since), page_size=page_size, page_token=page_token)
    except ValueError as error:
        raise TaskError("invalid-params", str(error)) from None
    tasks = [_trimmed(stored.task, history_length, include_artifacts) for stored in page.tasks]
    return {"tasks": tasks, "nextPageToken": page.next_page_token, "pageSize": page_size,
            "totalSize": page.total_size}


def _epoch(since: datetime | str | float | None) -> float | None:
    if since is None or isinstance(since, int | float):
        return since
    try:
        return parse_timestamp(since).timestamp()
    except ValueError as error:
        raise TaskError("invalid-params", str(error)) from None


def _trimmed(task: dict[str, Any], history_length: int | None,
             include_artifacts: bool) -> dict[str, Any]:
    out = dict(task)
    if not include_artifacts:
        out.pop("artifacts", None)
    if history_length is not None:
        if history_length == 0:
            out.pop("history", None)
        else:
            out["history"] = out.get("history", [])[-history_length:]
    return out
