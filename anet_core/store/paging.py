"""Pages of a ``tasks`` table newest first, as A2A ListTasks pages them, and the page tokens
that say where the next page starts: for the node's tasks, and a module's own
(``anet_core.api``)."""

from __future__ import annotations

import sqlite3
from typing import Any

from anet_core.util.canonical import decode_cursor, encode_cursor


def page_newest_first(db: sqlite3.Connection, equal: dict[str, Any], *,
                      updated_since: float | None, page_size: int,
                      page_token: str) -> tuple[list[sqlite3.Row], str, int]:
    """One page of a ``tasks`` table (columns ``id``, ``updated_at``: the node's, or a
    module's own) newest first, as A2A ListTasks pages tasks: the rows whose columns equal the
    non-None values of ``equal``, the next page's token ("" on the last page) and how many rows
    match in all. ``ValueError`` for a page token this node did not issue."""
    where = [f"{column} = ?" for column, value in equal.items() if value is not None]
    args: list[Any] = [value for value in equal.values() if value is not None]
    if updated_since is not None:
        where.append("updated_at >= ?")
        args.append(updated_since)
    condition = " AND ".join(where) or "1"
    total = db.execute(f"SELECT count(*) FROM tasks WHERE {condition}", args).fetchone()[0]
    if page_token:
        after_time, after_id = decode_page_token(page_token)
        condition += " AND (updated_at < ? OR (updated_at = ? AND id < ?))"
        args += [after_time, after_time, after_id]
    rows = db.execute(f"SELECT * FROM tasks WHERE {condition} ORDER BY updated_at DESC, id DESC"
                      " LIMIT ?", [*args, page_size + 1]).fetchall()
    page = rows[:page_size]
    more = len(rows) > page_size and page
    token = encode_page_token(page[-1]["updated_at"], page[-1]["id"]) if more else ""
    return page, token, total


def encode_page_token(updated_at: float, task_id: str) -> str:
    return encode_cursor({"ts": updated_at, "id": task_id})


def decode_page_token(token: str) -> tuple[float, str]:
    """The position a page token stands for; ``ValueError`` naming the token otherwise."""
    try:
        position = decode_cursor(token)
        return float(position["ts"]), str(position["id"])
    except (ValueError, TypeError, KeyError):
        raise ValueError(f"page token {token[:40]!r} is not one this node issued") from None
