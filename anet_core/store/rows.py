"""The store's typed rows and values: a task, an outbox entry, a journaled evidence record, a
page of tasks; and the error of a database that cannot be used."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from typing import Any

from anet_core.errors import AnetError


class TaskRole(StrEnum):
    """Which side of a network task this node is on."""

    REQUESTER = "requester"
    PROVIDER = "provider"



@dataclass
class StoredTask:
    """A task as the store keeps it: the A2A Task JSON plus what the network layer needs."""

    id: str
    role: TaskRole
    peer_aid: str
    context_id: str
    state: str
    state_seq: int
    skill: str | None
    task: dict[str, Any]
    receipt: dict[str, Any] | None
    served_by: str | None
    created_at: float
    updated_at: float
    last_heard_at: float

    @classmethod
    def from_row(cls, row: sqlite3.Row) -> StoredTask:
        return cls(id=row["id"], role=TaskRole(row["role"]), peer_aid=row["peer_aid"],
                   context_id=row["context_id"], state=row["state"], state_seq=row["state_seq"],
                   skill=row["skill"], task=json.loads(row["task_json"]),
                   receipt=json.loads(row["receipt_json"]) if row["receipt_json"] else None,
                   served_by=row["served_by"], created_at=row["created_at"],
                   updated_at=row["updated_at"], last_heard_at=row["last_heard_at"])


@dataclass(frozen=True)
class OutboxEntry:
    """A task message waiting for the hub. ``envelope``: the sealed envelope's JSON text, as it
    is sent every time (the link hands it on without encoding it again); None, as
    ``envelope_id``, until it is sealed."""

    seq: int
    peer_aid: str
    task_id: str
    body_json: str
    envelope: str | None
    attempts: int
    created_at: float = 0.0
    envelope_id: str | None = None

    @cached_property
    def body(self) -> dict[str, Any]:
        """The message, decoded when first asked for: a sealed entry is sent without it."""
        return json.loads(self.body_json)


@dataclass(frozen=True)
class JournaledRecord:
    """An evidence record as the journal keeps it: ``id`` is None until it is kept."""

    ts: int
    kind: str
    data: dict[str, Any]
    data_json: str
    """``data`` as JSON text, as the chain encoded it (canonical: one encoding serves the
    journal and the chain)."""
    id: int | None = None
    change: int = 0
    """The store's count of changes once it was kept: on disk when :meth:`Store.flush_now`
    with ``through`` at least this returned."""


@dataclass(frozen=True)
class TaskPage:
    tasks: list[StoredTask]
    next_page_token: str
    total_size: int


class StoreError(AnetError):
    """The database cannot be used; the message names the file and what to do."""
