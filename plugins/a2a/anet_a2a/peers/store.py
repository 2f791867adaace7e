"""The tasks sent to direct peers: ``<data>/modules/a2a/peer_tasks.db`` (SQLite).

A task here is this node's record of a task at a peer: the A2A Task the local client sees
(with this node's task and context ids), and where it lives at the peer. The pair
(contextId, messageId) of every message sent is kept per agent: a repeated message returns its
task and is not sent again. The schema carries its version in ``PRAGMA user_version``.
"""

from __future__ import annotations

import json
import sqlite3
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anet_core.api import immediate_transaction, page_newest_first

MIGRATIONS: tuple[str, ...] = (
    """
    CREATE TABLE tasks (
        id                TEXT PRIMARY KEY,
        agent             TEXT NOT NULL,
        context_id        TEXT NOT NULL,
        remote_context_id TEXT,
        remote_task_id    TEXT,
        state             TEXT NOT NULL,
        task_json         TEXT NOT NULL,
        created_at        REAL NOT NULL,
        updated_at        REAL NOT NULL
    );
    CREATE INDEX tasks_by_agent ON tasks (agent, updated_at DESC, id DESC);
    CREATE TABLE messages (
        agent       TEXT NOT NULL,
        context_id  TEXT NOT NULL,
        message_id  TEXT NOT NULL,
        task_id     TEXT NOT NULL REFERENCES tasks (id),
        PRIMARY KEY (agent, context_id, message_id)
    );
    """,
)


@dataclass
class PeerTask:
    id: str
    agent: str
    context_id: str
    remote_context_id: str | None
    remote_task_id: str | None
    state: str
    task: dict[str, Any]
    created_at: float
    updated_at: float

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> PeerTask:
        return cls(id=row["id"], agent=row["agent"], context_id=row["context_id"],
                   remote_context_id=row["remote_context_id"],
                   remote_task_id=row["remote_task_id"], state=row["state"],
                   task=json.loads(row["task_json"]), created_at=row["created_at"],
                   updated_at=row["updated_at"])


@dataclass(frozen=True)
class PeerTaskPage:
    tasks: list[PeerTask]
    next_page_token: str
    total_size: int


class PeerTaskStore:
    """Short synchronous statements on one connection, used from the event loop."""

    def __init__(self, path: Path) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.row_factory = sqlite3.Row
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = FULL")
        self._db.execute("PRAGMA foreign_keys = ON")
        self._migrate()

    def _migrate(self) -> None:
        found = self._db.execute("PRAGMA user_version").fetchone()[0]
        for version in range(found + 1, len(MIGRATIONS) + 1):
            with self.transaction():
                for statement in MIGRATIONS[version - 1].split(";"):
                    if statement.strip():
                        self._db.execute(statement)
                self._db.execute(f"PRAGMA user_version = {version}")

    def close(self) -> None:
        self._db.close()

    def transaction(self) -> AbstractContextManager[None]:
        return immediate_transaction(self._db)

    def insert(self, task: PeerTask, message_id: str) -> None:
        """The task and its first message's key, together."""
        with self.transaction():
            self._db.execute(
                "INSERT INTO tasks (id, agent, context_id, remote_context_id, remote_task_id,"
                " state, task_json, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (task.id, task.agent, task.context_id, task.remote_context_id,
                 task.remote_task_id, task.state, json.dumps(task.task), task.created_at,
                 task.updated_at))
            self.add_message(task.agent, task.context_id, message_id, task.id)

    def add_message(self, agent: str, context_id: str, message_id: str, task_id: str) -> None:
        self._db.execute("INSERT INTO messages (agent, context_id, message_id, task_id)"
                         " VALUES (?, ?, ?, ?)", (agent, context_id, message_id, task_id))

    def save(self, task: PeerTask) -> None:
        task.updated_at = time.time()
        self._db.execute(
            "UPDATE tasks SET remote_context_id = ?, remote_task_id = ?, state = ?,"
            " task_json = ?, updated_at = ? WHERE id = ?",
            (task.remote_context_id, task.remote_task_id, task.state, json.dumps(task.task),
             task.updated_at, task.id))

    def get(self, task_id: str, agent: str | None = None) -> PeerTask | None:
        row = self._db.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
        if row is None or (agent is not None and row["agent"] != agent):
            return None
        return PeerTask.from_row(row)

    def message_task(self, agent: str, context_id: str, message_id: str) -> str | None:
        row = self._db.execute("SELECT task_id FROM messages WHERE agent = ? AND context_id = ?"
                               " AND message_id = ?", (agent, context_id, message_id)).fetchone()
        return None if row is None else str(row[0])

    def in_states(self, states: set[str]) -> list[PeerTask]:
        marks = ",".join("?" * len(states))
        rows = self._db.execute(f"SELECT * FROM tasks WHERE state IN ({marks})",
                                sorted(states)).fetchall()
        return [PeerTask.from_row(row) for row in rows]

    def page(self, agent: str, *, context_id: str | None, state: str | None,
             since: float | None, page_size: int, page_token: str) -> PeerTaskPage:
        """Newest first, as A2A ListTasks pages them; ValueError for a foreign page token."""
        rows, token, total = page_newest_first(
            self._db, {"agent": agent, "context_id": context_id, "state": state},
            updated_since=since, page_size=page_size, page_token=page_token)
        return PeerTaskPage(tasks=[PeerTask.from_row(row) for row in rows],
                            next_page_token=token, total_size=total)
