"""The embedded implementation of :class:`HubStorage`: one SQLite file in WAL mode.

All statements run on one worker thread, so the event loop never blocks on the disk and the
connection is never shared between threads at the same time. ``anet hub approve`` and
``anet hub official`` open the same file from another process while the hub runs; WAL and a
busy timeout make that safe.
"""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any, TypeVar

from anet_hub.ledger_sqlite import LEDGER_SCHEMA, SqliteLedger
from anet_hub.storage import (
    AGENT_COLUMNS,
    AgentRecord,
    AgentState,
    CardIndex,
    QueuedEnvelope,
    ReviewRecord,
    SearchFilter,
    StorageError,
    agent_from_row,
    like_pattern,
)

T = TypeVar("T")

BUSY_TIMEOUT_MS = 5000

_SCHEMA = """
CREATE TABLE IF NOT EXISTS agents (
    aid TEXT PRIMARY KEY,
    state TEXT NOT NULL,
    history TEXT NOT NULL,
    key_seq INTEGER NOT NULL,
    card TEXT,
    search_text TEXT NOT NULL DEFAULT '',
    first_seen REAL NOT NULL,
    last_seen REAL NOT NULL,
    review_count INTEGER NOT NULL DEFAULT 0,
    rating_sum INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS agent_skills (aid TEXT NOT NULL, skill TEXT NOT NULL,
                                         PRIMARY KEY (aid, skill));
CREATE INDEX IF NOT EXISTS agent_skills_by_skill ON agent_skills (skill, aid);
CREATE TABLE IF NOT EXISTS agent_tags (aid TEXT NOT NULL, tag TEXT NOT NULL,
                                       PRIMARY KEY (aid, tag));
CREATE INDEX IF NOT EXISTS agent_tags_by_tag ON agent_tags (tag, aid);
CREATE TABLE IF NOT EXISTS reviews (
    receipt_key TEXT PRIMARY KEY,
    subject TEXT NOT NULL,
    reviewer TEXT NOT NULL,
    rating INTEGER NOT NULL,
    review TEXT NOT NULL,
    created REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS official_list (id INTEGER PRIMARY KEY CHECK (id = 1),
                                          doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS federation_instances (aid TEXT PRIMARY KEY, urls TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS envelopes (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    recipient TEXT NOT NULL,
    id TEXT NOT NULL,
    sender TEXT NOT NULL,
    text TEXT NOT NULL,
    stored_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    UNIQUE (recipient, id)
);
CREATE INDEX IF NOT EXISTS envelopes_by_recipient ON envelopes (recipient, seq);
CREATE INDEX IF NOT EXISTS envelopes_by_expiry ON envelopes (expires_at);
"""

class SqliteHubStorage:
    """SQLite behind :class:`HubStorage`. ``max_bytes`` caps the file (a quota: writes beyond it
    fail as ``hub-storage-full``, exactly as a full disk does)."""

    def __init__(self, path: Path, *, max_bytes: int | None = None) -> None:
        self.path = Path(path)
        self._executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="hub-sqlite")
        self._conn: sqlite3.Connection | None = None
        self._max_bytes = max_bytes
        self.ledger = SqliteLedger(self._transact)

    @classmethod
    async def open(cls, path: Path, *, max_bytes: int | None = None) -> SqliteHubStorage:
        storage = cls(path, max_bytes=max_bytes)
        await storage._call(storage._connect)
        return storage

    def _connect(self) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        conn.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        conn.execute("PRAGMA journal_mode = WAL")
        # NORMAL in WAL mode: a power cut may lose the last commits, never corrupts the file.
        # Senders then see no `accepted` for those and send again, which the queue dedupes.
        conn.execute("PRAGMA synchronous = NORMAL")
        conn.executescript(_SCHEMA)
        conn.executescript(LEDGER_SCHEMA)
        if self._max_bytes is not None:
            page_size = conn.execute("PRAGMA page_size").fetchone()[0]
            conn.execute(f"PRAGMA max_page_count = {max(1, self._max_bytes // page_size)}")
        self._conn = conn

    async def close(self) -> None:
        if self._conn is not None:
            await self._call(self._conn.close)
            self._conn = None
        self._executor.shutdown(wait=True)

    async def _call(self, fn: Callable[..., T], *args: Any) -> T:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._executor, self._guarded, fn, args)

    @staticmethod
    def _guarded(fn: Callable[..., T], args: tuple[Any, ...]) -> T:
        try:
            return fn(*args)
        except sqlite3.Error as error:
            code = getattr(error, "sqlite_errorcode", None)
            if code == sqlite3.SQLITE_FULL:
                raise StorageError("hub-storage-full", "the hub's storage is full") from error
            raise StorageError("hub-storage-error",
                               f"the hub's storage failed: {type(error).__name__}") from error

    def _tx(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._conn
        assert conn is not None, "storage used after close"
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = fn(conn)
            conn.execute("COMMIT")
        except BaseException:
            # SQLite rolls back by itself after some errors (a full disk among them); a second
            # ROLLBACK would then fail and hide the error that matters.
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return result

    async def _transact(self, fn: Callable[[sqlite3.Connection], T]) -> T:
        """``fn`` in one transaction on the worker thread (the ledger's way in)."""
        return await self._call(self._tx, fn)

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
        assert self._conn is not None, "storage used after close"
        return self._conn.execute(sql, params).fetchall()

    async def ping(self) -> None:
        await self._call(self._read, "SELECT 1")

    async def count_queued(self) -> int:
        rows = await self._call(self._read, "SELECT count(*) FROM envelopes")
        return int(rows[0][0])

    # -- registrations and the directory ------------------------------------------------------

    async def get_agent(self, aid: str) -> AgentRecord | None:
        rows = await self._call(self._read, f"SELECT {AGENT_COLUMNS} FROM agents WHERE aid = ?",
                                (aid,))
        return agent_from_row(rows[0]) if rows else None

    async def save_registration(self, aid: str, history: list[dict[str, Any]], key_seq: int,
                                state: AgentState, now: float) -> AgentRecord:
        def save(conn: sqlite3.Connection) -> AgentRecord:
            conn.execute(
                "INSERT INTO agents (aid, state, history, key_seq, first_seen, last_seen) "
                "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (aid) DO UPDATE SET "
                "history = excluded.history, key_seq = excluded.key_seq, "
                "last_seen = excluded.last_seen",
                (aid, state.value, json.dumps(history), key_seq, now, now))
            row = conn.execute(f"SELECT {AGENT_COLUMNS} FROM agents WHERE aid = ?",
                               (aid,)).fetchone()
            return agent_from_row(row)

        return await self._call(self._tx, save)

    async def approve(self, aid: str) -> bool:
        def approve(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute("UPDATE agents SET state = ? WHERE aid = ? AND state = ?",
                                  (AgentState.REGISTERED.value, aid, AgentState.PENDING.value))
            return cursor.rowcount == 1

        return await self._call(self._tx, approve)

    async def list_pending(self) -> list[AgentRecord]:
        rows = await self._call(self._read, f"SELECT {AGENT_COLUMNS} FROM agents WHERE state = ? "
                                            "ORDER BY first_seen, aid",
                                (AgentState.PENDING.value,))
        return [agent_from_row(row) for row in rows]

    async def touch(self, aid: str, now: float) -> None:
        def touch(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE agents SET last_seen = max(last_seen, ?) WHERE aid = ?",
                         (now, aid))

        await self._call(self._tx, touch)

    async def save_card(self, aid: str, card: dict[str, Any], index: CardIndex) -> None:
        def save(conn: sqlite3.Connection) -> None:
            conn.execute("UPDATE agents SET card = ?, search_text = ? WHERE aid = ?",
                         (json.dumps(card), index.text, aid))
            conn.execute("DELETE FROM agent_skills WHERE aid = ?", (aid,))
            conn.execute("DELETE FROM agent_tags WHERE aid = ?", (aid,))
            conn.executemany("INSERT INTO agent_skills (aid, skill) VALUES (?, ?)",
                             [(aid, skill) for skill in sorted(index.skills)])
            conn.executemany("INSERT INTO agent_tags (aid, tag) VALUES (?, ?)",
                             [(aid, tag) for tag in sorted(index.tags)])

        await self._call(self._tx, save)

    async def search(self, query: SearchFilter, *, after: str | None,
                     limit: int) -> list[AgentRecord]:
        clauses = ["a.state = ?", "a.card IS NOT NULL", "a.aid > ?"]
        params: list[Any] = [AgentState.REGISTERED.value, after or ""]
        if query.skill is not None:
            clauses.append("EXISTS (SELECT 1 FROM agent_skills s WHERE s.aid = a.aid "
                           "AND s.skill = ?)")
            params.append(query.skill)
        if query.tag is not None:
            clauses.append("EXISTS (SELECT 1 FROM agent_tags t WHERE t.aid = a.aid AND t.tag = ?)")
            params.append(query.tag)
        for word in query.words:
            clauses.append("a.search_text LIKE ? ESCAPE '\\'")
            params.append(like_pattern(word))
        columns = ", ".join(f"a.{name.strip()}" for name in AGENT_COLUMNS.split(","))
        sql = (f"SELECT {columns} FROM agents a WHERE {' AND '.join(clauses)} "
               "ORDER BY a.aid LIMIT ?")
        rows = await self._call(self._read, sql, (*params, limit))
        return [agent_from_row(row) for row in rows]

    # -- reviews ------------------------------------------------------------------------------

    async def add_review(self, review: ReviewRecord) -> bool:
        def add(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(
                "INSERT OR IGNORE INTO reviews (receipt_key, subject, reviewer, rating, review, "
                "created) VALUES (?, ?, ?, ?, ?, ?)",
                (review.receipt_key, review.subject, review.reviewer, review.rating,
                 json.dumps(review.review), review.created))
            if cursor.rowcount == 0:
                return False
            conn.execute("UPDATE agents SET review_count = review_count + 1, "
                         "rating_sum = rating_sum + ? WHERE aid = ?",
                         (review.rating, review.subject))
            return True

        return await self._call(self._tx, add)

    # -- the official list --------------------------------------------------------------------

    async def get_official_list(self) -> dict[str, Any] | None:
        rows = await self._call(self._read, "SELECT doc FROM official_list WHERE id = 1")
        return json.loads(rows[0][0]) if rows else None

    async def put_official_list(self, doc: dict[str, Any]) -> None:
        def put(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO official_list (id, doc) VALUES (1, ?) "
                         "ON CONFLICT (id) DO UPDATE SET doc = excluded.doc", (json.dumps(doc),))

        await self._call(self._tx, put)

    # -- federated hubs -----------------------------------------------------------------------

    async def peer_instances(self, aid: str) -> list[str]:
        rows = await self._call(self._read, "SELECT urls FROM federation_instances WHERE aid = ?",
                                (aid,))
        return json.loads(rows[0][0]) if rows else []

    async def save_peer_instances(self, aid: str, urls: list[str]) -> None:
        def save(conn: sqlite3.Connection) -> None:
            conn.execute("INSERT INTO federation_instances (aid, urls) VALUES (?, ?) "
                         "ON CONFLICT (aid) DO UPDATE SET urls = excluded.urls",
                         (aid, json.dumps(urls)))

        await self._call(self._tx, save)

    # -- queued envelopes ---------------------------------------------------------------------

    async def enqueue(self, *, id: str, sender: str, recipient: str, text: str, now: float,
                      ttl: float) -> int:
        def put(conn: sqlite3.Connection) -> int:
            conn.execute("INSERT OR IGNORE INTO envelopes (recipient, id, sender, text, "
                         "stored_at, expires_at) VALUES (?, ?, ?, ?, ?, ?)",
                         (recipient, id, sender, text, now, now + ttl))
            row = conn.execute("SELECT seq FROM envelopes WHERE recipient = ? AND id = ?",
                               (recipient, id)).fetchone()
            return int(row[0])

        return await self._call(self._tx, put)

    async def pending(self, recipient: str, *, after_seq: int, limit: int,
                      now: float) -> list[QueuedEnvelope]:
        rows = await self._call(
            self._read,
            "SELECT seq, id, sender, recipient, text, stored_at, expires_at FROM envelopes "
            "WHERE recipient = ? AND seq > ? AND expires_at > ? ORDER BY seq LIMIT ?",
            (recipient, after_seq, now, limit))
        return [QueuedEnvelope(*row) for row in rows]

    async def remove(self, recipient: str, envelope_id: str) -> bool:
        def remove(conn: sqlite3.Connection) -> bool:
            return conn.execute("DELETE FROM envelopes WHERE recipient = ? AND id = ?",
                                (recipient, envelope_id)).rowcount == 1

        return await self._call(self._tx, remove)

    async def purge_expired(self, now: float) -> int:
        return await self._call(self._tx, lambda conn: conn.execute(
            "DELETE FROM envelopes WHERE expires_at <= ?", (now,)).rowcount)
