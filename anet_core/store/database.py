"""The :class:`Store`: transactions, syncs of the WAL, and each table's reads and writes."""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Collection, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anet_core.store.paging import page_newest_first
from anet_core.store.rows import JournaledRecord, OutboxEntry, StoredTask, TaskPage, TaskRole
from anet_core.util.canonical import compact_json

if TYPE_CHECKING:
    import asyncio

POLICY_KEY = "inbound_policy"


class Store:
    """Typed access to ``anet.db``. Methods are synchronous and short; call them from the loop."""

    def __init__(self, connection: sqlite3.Connection, path: Path) -> None:
        self._db = connection
        self.path = path
        self._wal = path.with_name(path.name + "-wal")
        self._synced = 0
        """``total_changes`` of the connection when the WAL was last synced: every change
        counted there is on disk."""
        self._sealed_ahead: set[int] = set()
        """Outbox entries sealed as they were queued (``queue_message`` in tasks/outbox.py) that
        this process has not handed to the hub yet: certainly unsent. A restart forgets them, and
        then counts them as maybe sent, as every sealed entry."""
        self._settings: dict[str, str | None] = {}
        """Settings as last read or written (None: not set). The daemon is the database's only
        writer, so a copy is the truth until a rollback may have taken a write back; then it is
        read again. A new task asks for the inbound policy three times."""
        self._trusted: set[str] | None = None
        """The trust list, read once and kept as :attr:`_settings` are; None until read."""
        self._sync_waiters: list[tuple[int, asyncio.Future[None]]] = []
        """Who waits for a sync through a change count (:meth:`flush` with ``within``)."""
        self._taken: set[int] = set()
        """Outbox entries the hub took (:meth:`outbox_taken`), deleted by the next transaction
        instead of a commit of their own; no read of the outbox returns them meanwhile."""

    # --- transactions ----------------------------------------------------------------------

    @contextmanager
    def transaction(self, *, durable: bool = True) -> Iterator[None]:
        """Group writes: all of them are stored, or none (nesting joins the outer one).

        ``durable`` (the default): on disk when the block returns. ``durable=False``: committed
        (a crash of the daemon keeps it) but on disk only once :meth:`flush` returned; until
        then an OS crash or power cut may lose it, whole. Tell no one of such a write before
        ``await store.flush()``.
        """
        outermost = not self._db.in_transaction
        taken = tuple(self._taken) if outermost else ()
        try:
            with immediate_transaction(self._db):
                if taken:
                    self._db.execute(f"DELETE FROM outbox WHERE seq IN ({_marks(taken)})", taken)
                yield
        except BaseException:
            self._settings.clear()  # a write they hold may have been taken back
            self._trusted = None
            raise
        self._taken.difference_update(taken)
        if outermost and durable:
            self._sync_wal()

    async def flush(self, within: float = 0.0) -> None:
        """Return once every commit made before the call is on disk.

        One fsync of the WAL covers every commit made before it (group commit): the commits
        of every task handled in one turn of the event loop share it. It runs on the loop:
        an fsync of the WAL takes about 0.1 ms here, less than handing it to a thread costs in
        CPU (measured with ``bench/run.py``; docs/performance.md). ``within``: how long it may
        wait for a sync made anyway (a transaction's own, another caller's) to cover those
        commits before it makes one: one fsync then serves both."""
        import asyncio  # loaded by every caller already; the CLI's use of the store needs none

        through = self._db.total_changes
        if within > 0 and self._synced < through:
            synced = asyncio.get_running_loop().create_future()
            self._sync_waiters.append((through, synced))
            with suppress(TimeoutError):
                async with asyncio.timeout(within):
                    await synced
        self.flush_now(through)

    def flush_now(self, through: int | None = None) -> None:
        """:meth:`flush` from where nothing can be awaited (a callback of the loop: the evidence
        chain's append). ``through``: only the changes up to that count need to be on disk (a
        :attr:`JournaledRecord.change`); no fsync when a sync since covered them."""
        if self._synced < (self._db.total_changes if through is None else through):
            self._sync_wal()

    def _sync_wal(self) -> None:
        """fsync the WAL file: every frame SQLite wrote to it, so every commit, is on disk; then
        wake who waits for that (:meth:`flush`).

        (SQLite syncs the WAL's header itself when it starts the file over, and with it the
        directory on its creation; a checkpoint syncs the WAL before it copies pages.)"""
        try:
            fd = os.open(self._wal, os.O_RDONLY)
        except FileNotFoundError:
            pass  # no WAL: everything is in the database file, which SQLite synced
        else:
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._synced = self._db.total_changes
        if self._sync_waiters:
            waiting, self._sync_waiters = self._sync_waiters, []
            for through, synced in waiting:
                if synced.done():
                    continue  # its wait ended: it syncs by itself
                if through <= self._synced:
                    synced.set_result(None)
                else:
                    self._sync_waiters.append((through, synced))

    # --- tasks -------------------------------------------------------------------------------

    def insert_task(self, task: StoredTask) -> None:
        self._db.execute(
            "INSERT INTO tasks (id, role, peer_aid, context_id, state, state_seq, skill, task_json,"
            " receipt_json, served_by, created_at, updated_at, last_heard_at)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (task.id, task.role.value, task.peer_aid, task.context_id, task.state, task.state_seq,
             task.skill, json.dumps(task.task), _json_or_none(task.receipt), task.served_by,
             task.created_at, task.updated_at, task.last_heard_at))

    def save_task(self, task: StoredTask) -> None:
        """Write back the mutable parts of a task read earlier."""
        self._db.execute(
            "UPDATE tasks SET state = ?, state_seq = ?, task_json = ?, receipt_json = ?,"
            " served_by = ?, updated_at = ?, last_heard_at = ? WHERE id = ?",
            (task.state, task.state_seq, json.dumps(task.task), _json_or_none(task.receipt),
             task.served_by, task.updated_at, task.last_heard_at, task.id))

    def set_served_by(self, task_id: str, module: str) -> None:
        """Write only ``served_by``: the module that serves the task."""
        self._db.execute("UPDATE tasks SET served_by = ? WHERE id = ?", (module, task_id))

    def get_task(self, task_id: str, *, role: TaskRole | None = None,
                 peer_aid: str | None = None) -> StoredTask | None:
        """The task, or None when it does not exist or belongs to another role or peer."""
        row = self._db.execute("SELECT * FROM tasks WHERE id = ?", (task_id,)).fetchone()
        if row is None:
            return None
        task = StoredTask.from_row(row)
        if (role is not None and task.role is not role) or (
                peer_aid is not None and task.peer_aid != peer_aid):
            return None
        return task

    def tasks_in_states(self, role: TaskRole, states: Collection[str]) -> list[StoredTask]:
        rows = self._db.execute(
            f"SELECT * FROM tasks WHERE role = ? AND state IN ({_marks(states)})",
            (role.value, *_names(states))).fetchall()
        return [StoredTask.from_row(row) for row in rows]

    def heard_from(self, role: TaskRole, peer_aid: str, task_ids: list[str],
                   states: Collection[str], at: float) -> int:
        """Move ``last_heard_at`` of these tasks of ``peer_aid`` (those in ``states``) forward to
        ``at``; nothing else changes. Returns how many tasks moved."""
        if not task_ids:
            return 0
        cursor = self._db.execute(
            f"UPDATE tasks SET last_heard_at = ? WHERE role = ? AND peer_aid = ?"
            f" AND id IN ({_marks(task_ids)}) AND state IN ({_marks(states)})"
            " AND last_heard_at < ?",
            (at, role.value, peer_aid, *task_ids, *_names(states), at))
        return cursor.rowcount

    def list_tasks(self, role: TaskRole, *, peer_aid: str | None = None,
                   context_id: str | None = None, state: str | None = None,
                   updated_since: float | None = None, page_size: int = 50,
                   page_token: str = "") -> TaskPage:
        """Tasks newest first (by status time, then id), as A2A ListTasks pages them."""
        rows, token, total = page_newest_first(
            self._db, {"role": role.value, "peer_aid": peer_aid, "context_id": context_id,
                       "state": state}, updated_since=updated_since, page_size=page_size,
            page_token=page_token)
        return TaskPage(tasks=[StoredTask.from_row(row) for row in rows], next_page_token=token,
                        total_size=total)

    def has_tasks(self, role: TaskRole, peer_aid: str) -> bool:
        """Whether any task of ``role`` with ``peer_aid`` is stored (one index probe)."""
        return self._db.execute("SELECT 1 FROM tasks WHERE role = ? AND peer_aid = ? LIMIT 1",
                                (role.value, peer_aid)).fetchone() is not None

    # --- idempotency keys ----------------------------------------------------------------------

    def message_task(self, role: TaskRole, peer_aid: str, context_id: str,
                     message_id: str) -> str | None:
        """The task a message with this (contextId, messageId) already went to, if any."""
        row = self._db.execute(
            "SELECT task_id FROM messages WHERE role = ? AND peer_aid = ? AND context_id = ?"
            " AND message_id = ?", (role.value, peer_aid, context_id, message_id)).fetchone()
        return None if row is None else row[0]

    def add_message(self, role: TaskRole, peer_aid: str, context_id: str, message_id: str,
                    task_id: str) -> None:
        self._db.execute(
            "INSERT INTO messages (role, peer_aid, context_id, message_id, task_id, created_at)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (role.value, peer_aid, context_id, message_id, task_id, time.time()))

    # --- outbox --------------------------------------------------------------------------------

    def enqueue(self, peer_aid: str, body: dict[str, Any], *, task_id: str,
                envelope: dict[str, Any] | None = None) -> None:
        """Queue ``body`` for ``peer_aid``; ``envelope``: already sealed (``queue_message`` in
        tasks/outbox.py), unsent until :meth:`outbox_attempt`."""
        now = time.time()
        cursor = self._db.execute(
            "INSERT INTO outbox (peer_aid, task_id, body_json, envelope_id, envelope_json,"
            " created_at, next_attempt_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (peer_aid, task_id, json.dumps(body), envelope and envelope["id"],
             envelope and compact_json(envelope), now, now))
        if envelope is not None:
            self._sealed_ahead.add(cursor.lastrowid)

    def outbox_due(self, now: float, limit: int = 100) -> list[OutboxEntry]:
        """Entries in the order they were queued, up to the first one that is not due yet."""
        left_out, taken = self._not_taken()
        rows = self._db.execute(f"SELECT * FROM outbox{left_out} ORDER BY seq LIMIT ?",
                                (*taken, limit)).fetchall()
        due = []
        for row in rows:
            if row["next_attempt_at"] > now:
                break  # keep the order: nothing overtakes an entry that waits for a retry
            due.append(OutboxEntry(
                seq=row["seq"], peer_aid=row["peer_aid"], task_id=row["task_id"],
                body_json=row["body_json"], envelope=row["envelope_json"],
                attempts=row["attempts"], created_at=row["created_at"],
                envelope_id=row["envelope_id"]))
        return due

    def outbox_next_attempt(self) -> float | None:
        left_out, taken = self._not_taken()
        row = self._db.execute(f"SELECT next_attempt_at FROM outbox{left_out} ORDER BY seq"
                               " LIMIT 1", taken).fetchone()
        return None if row is None else row[0]

    def outbox_sealed(self, seq: int, envelope_id: str, text: str) -> None:
        """Keep the sealed envelope (``text``, its JSON): from now on every attempt sends
        exactly this one."""
        self._db.execute("UPDATE outbox SET envelope_id = ?, envelope_json = ? WHERE seq = ?",
                         (envelope_id, text, seq))

    def outbox_attempt(self, seq: int) -> None:
        """The entry is about to be handed to the hub: it may reach it from now on."""
        self._sealed_ahead.discard(seq)

    def outbox_done(self, seq: int) -> None:
        self._db.execute("DELETE FROM outbox WHERE seq = ?", (seq,))
        self._sealed_ahead.discard(seq)

    def outbox_taken(self, seq: int) -> None:
        """The hub took the entry, and nothing else changes with it: it is deleted by the next
        transaction, not by a commit of its own (the outbox, when idle, makes one:
        :meth:`outbox_forget_taken`). A crash before then sends it again under the same
        envelope id, which the receiver drops as a replay, as a crash between the hub's answer
        and a commit of its own could."""
        self._sealed_ahead.discard(seq)
        self._taken.add(seq)

    def outbox_forget_taken(self) -> None:
        """Delete the entries the hub took now: a transaction of their own, which deletes them
        as every transaction does."""
        if self._taken:
            with self.transaction(durable=False):
                pass

    def _not_taken(self) -> tuple[str, tuple[int, ...]]:
        """The condition that leaves out the entries the hub took, and its arguments."""
        taken = tuple(self._taken)
        return (f" WHERE seq NOT IN ({_marks(taken)})", taken) if taken else ("", ())

    def outbox_waited(self, task_id: str, error: str) -> None:
        """The task's entries not yet tried count as tried once (``error`` the reason), so that
        the hub taking them is told (``Outbox`` tells only of entries that took more than one
        attempt): they were queued while the hub was away."""
        self._db.execute("UPDATE outbox SET attempts = 1, last_error = ? "
                         "WHERE task_id = ? AND attempts = 0", (error, task_id))

    def outbox_retry_later(self, seq: int, at: float, error: str) -> None:
        self._db.execute("UPDATE outbox SET attempts = attempts + 1, next_attempt_at = ?,"
                         " last_error = ? WHERE seq = ?", (at, error, seq))

    def outbox_only_unsent(self, task_id: str) -> bool:
        """True when this task has entries here and none of them can have reached the hub: each
        is unsealed, or sealed as it was queued and not handed to the hub since. False once one
        was handed to the hub, and once the hub took them all (they are gone)."""
        rows = self._db.execute("SELECT seq, envelope_id FROM outbox WHERE task_id = ?",
                                (task_id,)).fetchall()
        return bool(rows) and all(envelope_id is None or seq in self._sealed_ahead
                                  for seq, envelope_id in rows)

    def count_tasks(self) -> list[tuple[str, str, int]]:
        """(role, state, how many) for every role and state that has tasks."""
        return [(row[0], row[1], row[2]) for row in self._db.execute(
            "SELECT role, state, count(*) FROM tasks GROUP BY role, state ORDER BY role, state")]

    def outbox_depth(self) -> int:
        """Messages waiting for the hub to take them (a metric)."""
        left_out, taken = self._not_taken()
        return self._db.execute(f"SELECT count(*) FROM outbox{left_out}", taken).fetchone()[0]

    def outbox_withdraw(self, task_id: str) -> int:
        """Remove a task's entries (the task ended here first): the unsent ones, and those the
        hub took that wait for their deletion; return how many."""
        if self._sealed_ahead:
            self._sealed_ahead.difference_update(row[0] for row in self._db.execute(
                "SELECT seq FROM outbox WHERE task_id = ?", (task_id,)))
        return self._db.execute("DELETE FROM outbox WHERE task_id = ?", (task_id,)).rowcount

    # --- replay protection -------------------------------------------------------------------

    def mark_seen(self, envelope_id: str, sender: str, expires_at: float) -> bool:
        """Record an opened envelope id; False when it was seen before (a replay)."""
        cursor = self._db.execute(
            "INSERT OR IGNORE INTO seen_envelopes (envelope_id, sender, expires_at)"
            " VALUES (?, ?, ?)", (envelope_id, sender, expires_at))
        return cursor.rowcount == 1

    def was_seen(self, envelope_id: str) -> bool:
        return self._db.execute("SELECT 1 FROM seen_envelopes WHERE envelope_id = ?",
                                (envelope_id,)).fetchone() is not None

    def forget_expired_envelopes(self, now: float) -> int:
        return self._db.execute("DELETE FROM seen_envelopes WHERE expires_at < ?",
                                (now,)).rowcount

    # --- updates that arrived early ------------------------------------------------------------

    def hold_update(self, task_id: str, state_seq: int, body: dict[str, Any]) -> None:
        self._db.execute("INSERT OR IGNORE INTO pending_updates (task_id, state_seq, body_json)"
                         " VALUES (?, ?, ?)", (task_id, state_seq, json.dumps(body)))

    def held_update(self, task_id: str, state_seq: int) -> dict[str, Any] | None:
        row = self._db.execute("SELECT body_json FROM pending_updates WHERE task_id = ? AND"
                               " state_seq = ?", (task_id, state_seq)).fetchone()
        return None if row is None else json.loads(row[0])

    def drop_held_updates(self, task_id: str, *, up_to: int | None = None) -> None:
        if up_to is None:
            self._db.execute("DELETE FROM pending_updates WHERE task_id = ?", (task_id,))
        else:
            self._db.execute("DELETE FROM pending_updates WHERE task_id = ? AND state_seq <= ?",
                             (task_id, up_to))

    # --- trust list and inbound policy -------------------------------------------------------

    def trust(self, aid: str) -> bool:
        """Add ``aid`` to the trust list; False when it was there already."""
        added = self._db.execute("INSERT OR IGNORE INTO trust (aid, added_at) VALUES (?, ?)",
                                 (aid, time.time())).rowcount == 1
        if self._trusted is not None:
            self._trusted.add(aid)
        return added

    def distrust(self, aid: str) -> bool:
        """Remove ``aid`` from the trust list; False when it was not on it."""
        removed = self._db.execute("DELETE FROM trust WHERE aid = ?", (aid,)).rowcount == 1
        if self._trusted is not None:
            self._trusted.discard(aid)
        return removed

    def is_trusted(self, aid: str) -> bool:
        if self._trusted is None:
            self._trusted = {row[0] for row in self._db.execute("SELECT aid FROM trust")}
        return aid in self._trusted

    def trusted(self) -> list[tuple[str, float]]:
        return [(row[0], row[1]) for row in
                self._db.execute("SELECT aid, added_at FROM trust ORDER BY added_at, aid")]

    @property
    def inbound_policy(self) -> str | None:
        """The inbound policy set last (``anet_core.tasks.policy`` says what it means), None
        before any was set."""
        if POLICY_KEY not in self._settings:
            row = self._db.execute("SELECT value FROM settings WHERE key = ?",
                                   (POLICY_KEY,)).fetchone()
            self._settings[POLICY_KEY] = None if row is None else row[0]
        return self._settings[POLICY_KEY]

    def set_inbound_policy(self, policy: str) -> None:
        self._db.execute("INSERT INTO settings (key, value) VALUES (?, ?) ON CONFLICT (key)"
                         " DO UPDATE SET value = excluded.value", (POLICY_KEY, str(policy)))
        self._settings[POLICY_KEY] = str(policy)

    # --- evidence journal ----------------------------------------------------------------------

    def journal_evidence(self, records: list[JournaledRecord]) -> list[JournaledRecord]:
        """Keep records until the evidence chain has them on disk; they are durable with the
        next :meth:`flush`. Returns them with their journal ids, in order."""
        with self.transaction(durable=False):
            return [JournaledRecord(record.ts, record.kind, record.data, record.data_json,
                                    self._db.execute(
                                        "INSERT INTO evidence_journal (ts, kind, data_json)"
                                        " VALUES (?, ?, ?)",
                                        (record.ts, record.kind, record.data_json)).lastrowid,
                                    self._db.total_changes)
                    for record in records]

    def journaled_evidence(self) -> list[JournaledRecord]:
        """The records still kept, oldest first."""
        return [JournaledRecord(row["ts"], row["kind"], json.loads(row["data_json"]),
                                row["data_json"], row["id"])
                for row in self._db.execute("SELECT * FROM evidence_journal ORDER BY id")]

    def forget_evidence(self, through: int) -> None:
        """The chain holds every record up to journal id ``through`` on disk."""
        with self.transaction(durable=False):
            self._db.execute("DELETE FROM evidence_journal WHERE id <= ?", (through,))

    # --- inbox -----------------------------------------------------------------------------------

    def to_inbox(self, task_id: str) -> None:
        self._db.execute("INSERT OR IGNORE INTO inbox (task_id, arrived_at) VALUES (?, ?)",
                         (task_id, time.time()))

    def out_of_inbox(self, task_id: str) -> None:
        self._db.execute("DELETE FROM inbox WHERE task_id = ?", (task_id,))

    def inbox(self) -> list[StoredTask]:
        rows = self._db.execute("SELECT tasks.* FROM inbox JOIN tasks ON tasks.id = inbox.task_id"
                                " ORDER BY inbox.arrived_at, tasks.id").fetchall()
        return [StoredTask.from_row(row) for row in rows]

    def in_inbox(self, task_id: str) -> bool:
        return self._db.execute("SELECT 1 FROM inbox WHERE task_id = ?",
                                (task_id,)).fetchone() is not None


def _marks(values: Collection[object]) -> str:
    """The placeholders of an ``IN (...)`` for ``values``."""
    return ",".join("?" * len(values))


@contextmanager
def immediate_transaction(db: sqlite3.Connection) -> Iterator[None]:
    """``BEGIN IMMEDIATE`` … ``COMMIT`` on a connection opened with ``isolation_level=None``,
    rolled back on any exception; inside an open transaction, the block joins it."""
    if db.in_transaction:
        yield
        return
    db.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        db.execute("ROLLBACK")
        raise
    db.execute("COMMIT")


def _names(states: Collection[str]) -> list[str]:
    """State names as plain text (a TaskState is a str, bound by its value)."""
    return sorted(str(state) for state in states)


def _json_or_none(value: dict[str, Any] | None) -> str | None:
    return None if value is None else json.dumps(value)
