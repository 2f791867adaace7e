"""The shared implementation of :class:`HubStorage`: PostgreSQL, for several instances of one hub.

Every method is one transaction on a connection of an ``asyncpg`` pool, so any number of hub
instances may write at once: the queue's uniqueness (recipient, id) and the review's receipt key
are constraints of the database, not checks in a process. It also keeps what must hold across
instances and SQLite keeps in memory: the hub's AID (instances started with another operator key
are refused) and the per-node token buckets (rate limits, on the database's clock).

A lost connection (PostgreSQL restarting) fails the operation with ``hub-storage-error``; the
pool opens a new connection for the next one, so the hub recovers by itself. Needs the extra
``anet-hub[cluster]``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import asyncpg

from anet_hub.advertisement import ADVERTISED_FOR_S
from anet_hub.ledger_postgres import LEDGER_SCHEMA, PostgresLedger
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
    redacted,
)

T = TypeVar("T")

POOL_SIZE = 10
CONNECT_TIMEOUT_S = 5.0
COMMAND_TIMEOUT_S = 15.0
SCHEMA_LOCK = 0x616E6574  # "anet": instances starting together create the schema one at a time

_SCHEMA = """
CREATE TABLE IF NOT EXISTS hub_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS agents (
    aid TEXT COLLATE "C" PRIMARY KEY,
    state TEXT NOT NULL,
    history TEXT NOT NULL,
    key_seq INTEGER NOT NULL,
    card TEXT,
    search_text TEXT NOT NULL DEFAULT '',
    first_seen DOUBLE PRECISION NOT NULL,
    last_seen DOUBLE PRECISION NOT NULL,
    review_count INTEGER NOT NULL DEFAULT 0,
    rating_sum BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS agents_pending ON agents (first_seen) WHERE state = 'pending';
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
    created DOUBLE PRECISION NOT NULL
);
CREATE TABLE IF NOT EXISTS official_list (id INTEGER PRIMARY KEY CHECK (id = 1),
                                          doc TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS federation_instances (aid TEXT PRIMARY KEY, urls TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS envelopes (
    seq BIGSERIAL PRIMARY KEY,
    recipient TEXT NOT NULL,
    id TEXT NOT NULL,
    sender TEXT NOT NULL,
    text TEXT NOT NULL,
    stored_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    UNIQUE (recipient, id)
);
CREATE INDEX IF NOT EXISTS envelopes_by_recipient ON envelopes (recipient, seq);
CREATE INDEX IF NOT EXISTS envelopes_by_expiry ON envelopes (expires_at);
CREATE TABLE IF NOT EXISTS rate_buckets (
    aid TEXT PRIMARY KEY,
    tokens DOUBLE PRECISION NOT NULL,
    stamp DOUBLE PRECISION NOT NULL,
    granted BOOLEAN NOT NULL
);
CREATE TABLE IF NOT EXISTS instances (id TEXT PRIMARY KEY, seen DOUBLE PRECISION NOT NULL);
ALTER TABLE instances ADD COLUMN IF NOT EXISTS url TEXT;
CREATE TABLE IF NOT EXISTS presence (
    aid TEXT COLLATE "C" PRIMARY KEY,
    instance TEXT NOT NULL,
    since DOUBLE PRECISION NOT NULL
);
"""

_NOW = "extract(epoch from clock_timestamp())"
_TAKE_TOKEN = f"""
INSERT INTO rate_buckets AS b (aid, tokens, stamp, granted) VALUES ($1, $3 - 1, {_NOW}, true)
ON CONFLICT (aid) DO UPDATE SET
    tokens = least($3, b.tokens + greatest(0, {_NOW} - b.stamp) * $2)
             - (least($3, b.tokens + greatest(0, {_NOW} - b.stamp) * $2) >= 1)::int,
    granted = least($3, b.tokens + greatest(0, {_NOW} - b.stamp) * $2) >= 1,
    stamp = greatest(b.stamp, {_NOW})
RETURNING granted, tokens
"""
"""The token bucket of ``relay.TokenBucket`` as one statement: refill by the time passed (on
the database's clock, so instances' clocks do not matter), take a token when there is one."""

_CONNECTION_ERRORS = (asyncpg.PostgresError, asyncpg.InterfaceError, OSError, TimeoutError)


class PostgresHubStorage:
    """PostgreSQL behind :class:`HubStorage` (and :class:`anet_hub.relay.SharedBuckets`)."""

    def __init__(self, url: str, pool: asyncpg.Pool) -> None:
        self.url = url
        self._pool = pool
        self.ledger = PostgresLedger(self._run)

    @classmethod
    async def open(cls, url: str, *, hub_aid: str | None = None) -> PostgresHubStorage:
        """Connect, create the schema if it is missing, and claim the database for ``hub_aid``:
        a database that belongs to another hub is refused (:class:`StorageError`)."""
        try:
            pool = await asyncpg.create_pool(url, min_size=1, max_size=POOL_SIZE,
                                             timeout=CONNECT_TIMEOUT_S,
                                             command_timeout=COMMAND_TIMEOUT_S)
        except _CONNECTION_ERRORS as error:
            raise StorageError("hub-storage-unreachable",
                               f"cannot connect to PostgreSQL at {redacted(url)}: "
                               f"{_describe(error)}") from error
        storage = cls(url, pool)
        try:
            await storage._run(storage._prepare, hub_aid)
        except BaseException:
            await pool.close()
            raise
        return storage

    @staticmethod
    async def _prepare(conn: asyncpg.Connection, hub_aid: str | None) -> None:
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", SCHEMA_LOCK)
            await conn.execute(_SCHEMA)
            await conn.execute(LEDGER_SCHEMA)
            if hub_aid is None:
                return
            owner = await conn.fetchval(
                "INSERT INTO hub_meta (key, value) VALUES ('hub_aid', $1) "
                "ON CONFLICT (key) DO UPDATE SET value = hub_meta.value RETURNING value", hub_aid)
        if owner != hub_aid:
            raise StorageError("hub-storage-other-hub",
                               f"this database belongs to the hub {owner}, and this instance's "
                               f"operator key is {hub_aid}; give every instance a copy of the "
                               "first instance's identity/ directory")

    async def close(self) -> None:
        await self._pool.close()

    async def _run(self, fn: Callable[..., Awaitable[T]], *args: Any) -> T:
        try:
            async with self._pool.acquire(timeout=CONNECT_TIMEOUT_S) as conn:
                return await fn(conn, *args)
        except asyncpg.DiskFullError as error:
            raise StorageError("hub-storage-full", "the hub's storage is full") from error
        except _CONNECTION_ERRORS as error:
            raise StorageError("hub-storage-error",
                               f"the hub's storage failed: {_describe(error)}") from error

    async def _fetch(self, sql: str, *args: Any) -> list[asyncpg.Record]:
        async def fetch(conn: asyncpg.Connection) -> list[asyncpg.Record]:
            return list(await conn.fetch(sql, *args))

        return await self._run(fetch)

    async def _execute(self, sql: str, *args: Any) -> str:
        async def execute(conn: asyncpg.Connection) -> str:
            return str(await conn.execute(sql, *args))

        return await self._run(execute)

    async def ping(self) -> None:
        await self._fetch("SELECT 1")

    async def count_queued(self) -> int:
        rows = await self._fetch("SELECT count(*) FROM envelopes")
        return int(rows[0][0])

    # -- registrations and the directory ------------------------------------------------------

    async def get_agent(self, aid: str) -> AgentRecord | None:
        rows = await self._fetch(f"SELECT {AGENT_COLUMNS} FROM agents WHERE aid = $1", aid)
        return agent_from_row(rows[0]) if rows else None

    async def save_registration(self, aid: str, history: list[dict[str, Any]], key_seq: int,
                                state: AgentState, now: float) -> AgentRecord:
        rows = await self._fetch(
            "INSERT INTO agents (aid, state, history, key_seq, first_seen, last_seen) "
            "VALUES ($1, $2, $3, $4, $5, $5) ON CONFLICT (aid) DO UPDATE SET "
            "history = excluded.history, key_seq = excluded.key_seq, "
            f"last_seen = excluded.last_seen RETURNING {AGENT_COLUMNS}",
            aid, state.value, json.dumps(history), key_seq, now)
        return agent_from_row(rows[0])

    async def approve(self, aid: str) -> bool:
        status = await self._execute("UPDATE agents SET state = $1 WHERE aid = $2 AND state = $3",
                                     AgentState.REGISTERED.value, aid, AgentState.PENDING.value)
        return status == "UPDATE 1"

    async def list_pending(self) -> list[AgentRecord]:
        rows = await self._fetch(f"SELECT {AGENT_COLUMNS} FROM agents WHERE state = $1 "
                                 "ORDER BY first_seen, aid", AgentState.PENDING.value)
        return [agent_from_row(row) for row in rows]

    async def touch(self, aid: str, now: float) -> None:
        await self._execute("UPDATE agents SET last_seen = greatest(last_seen, $1) "
                            "WHERE aid = $2", now, aid)

    async def save_card(self, aid: str, card: dict[str, Any], index: CardIndex) -> None:
        async def save(conn: asyncpg.Connection) -> None:
            async with conn.transaction():
                await conn.execute("UPDATE agents SET card = $1, search_text = $2 WHERE aid = $3",
                                   json.dumps(card), index.text, aid)
                await conn.execute("DELETE FROM agent_skills WHERE aid = $1", aid)
                await conn.execute("DELETE FROM agent_tags WHERE aid = $1", aid)
                await conn.executemany("INSERT INTO agent_skills (aid, skill) VALUES ($1, $2)",
                                       [(aid, skill) for skill in sorted(index.skills)])
                await conn.executemany("INSERT INTO agent_tags (aid, tag) VALUES ($1, $2)",
                                       [(aid, tag) for tag in sorted(index.tags)])

        await self._run(save)

    async def search(self, query: SearchFilter, *, after: str | None,
                     limit: int) -> list[AgentRecord]:
        params: list[Any] = [AgentState.REGISTERED.value, after or ""]

        def param(value: Any) -> str:
            params.append(value)
            return f"${len(params)}"

        clauses = ["a.state = $1", "a.card IS NOT NULL", "a.aid > $2"]
        if query.skill is not None:
            clauses.append("EXISTS (SELECT 1 FROM agent_skills s WHERE s.aid = a.aid "
                           f"AND s.skill = {param(query.skill)})")
        if query.tag is not None:
            clauses.append("EXISTS (SELECT 1 FROM agent_tags t WHERE t.aid = a.aid "
                           f"AND t.tag = {param(query.tag)})")
        for word in query.words:
            clauses.append(f"a.search_text LIKE {param(like_pattern(word))} ESCAPE '\\'")
        columns = ", ".join(f"a.{name.strip()}" for name in AGENT_COLUMNS.split(","))
        rows = await self._fetch(f"SELECT {columns} FROM agents a WHERE {' AND '.join(clauses)} "
                                 f"ORDER BY a.aid LIMIT {param(limit)}", *params)
        return [agent_from_row(row) for row in rows]

    # -- reviews ------------------------------------------------------------------------------

    async def add_review(self, review: ReviewRecord) -> bool:
        async def add(conn: asyncpg.Connection) -> bool:
            async with conn.transaction():
                status = await conn.execute(
                    "INSERT INTO reviews (receipt_key, subject, reviewer, rating, review, "
                    "created) VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING",
                    review.receipt_key, review.subject, review.reviewer, review.rating,
                    json.dumps(review.review), review.created)
                if status != "INSERT 0 1":
                    return False
                await conn.execute("UPDATE agents SET review_count = review_count + 1, "
                                   "rating_sum = rating_sum + $1 WHERE aid = $2",
                                   review.rating, review.subject)
                return True

        return await self._run(add)

    # -- the official list --------------------------------------------------------------------

    async def get_official_list(self) -> dict[str, Any] | None:
        rows = await self._fetch("SELECT doc FROM official_list WHERE id = 1")
        return json.loads(rows[0][0]) if rows else None

    async def put_official_list(self, doc: dict[str, Any]) -> None:
        await self._execute("INSERT INTO official_list (id, doc) VALUES (1, $1) "
                            "ON CONFLICT (id) DO UPDATE SET doc = excluded.doc", json.dumps(doc))

    # -- federated hubs -----------------------------------------------------------------------

    async def peer_instances(self, aid: str) -> list[str]:
        rows = await self._fetch("SELECT urls FROM federation_instances WHERE aid = $1", aid)
        return json.loads(rows[0][0]) if rows else []

    async def save_peer_instances(self, aid: str, urls: list[str]) -> None:
        await self._execute("INSERT INTO federation_instances (aid, urls) VALUES ($1, $2) "
                            "ON CONFLICT (aid) DO UPDATE SET urls = excluded.urls", aid,
                            json.dumps(urls))

    # -- queued envelopes ---------------------------------------------------------------------

    async def enqueue(self, *, id: str, sender: str, recipient: str, text: str, now: float,
                      ttl: float) -> int:
        async def put(conn: asyncpg.Connection) -> int:
            seq = await conn.fetchval(
                "INSERT INTO envelopes (recipient, id, sender, text, stored_at, expires_at) "
                "VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (recipient, id) DO NOTHING "
                "RETURNING seq", recipient, id, sender, text, now, now + ttl)
            if seq is None:  # stored before: a sender retrying after a lost `accepted`
                seq = await conn.fetchval("SELECT seq FROM envelopes WHERE recipient = $1 "
                                          "AND id = $2", recipient, id)
            return int(seq or 0)

        return await self._run(put)

    async def pending(self, recipient: str, *, after_seq: int, limit: int,
                      now: float) -> list[QueuedEnvelope]:
        rows = await self._fetch(
            "SELECT seq, id, sender, recipient, text, stored_at, expires_at FROM envelopes "
            "WHERE recipient = $1 AND seq > $2 AND expires_at > $3 ORDER BY seq LIMIT $4",
            recipient, after_seq, now, limit)
        return [QueuedEnvelope(*row) for row in rows]

    async def remove(self, recipient: str, envelope_id: str) -> bool:
        status = await self._execute("DELETE FROM envelopes WHERE recipient = $1 AND id = $2",
                                     recipient, envelope_id)
        return status == "DELETE 1"

    async def purge_expired(self, now: float) -> int:
        status = await self._execute("DELETE FROM envelopes WHERE expires_at <= $1", now)
        await self._execute(f"DELETE FROM instances WHERE seen < {_NOW} - $1", ADVERTISED_FOR_S)
        return int(status.split()[-1])

    # -- rate limits across instances ---------------------------------------------------------

    async def take_token(self, aid: str, rate: float, burst: int) -> float:
        rows = await self._fetch(_TAKE_TOKEN, aid, rate, float(burst))
        granted, tokens = rows[0]
        return 0.0 if granted else (1 - tokens) / rate

    # -- which instance holds which node --------------------------------------------------------

    async def instance_alive(self, instance: str, url: str | None) -> None:
        await self._execute(f"INSERT INTO instances (id, seen, url) VALUES ($1, {_NOW}, $2) "
                            f"ON CONFLICT (id) DO UPDATE SET seen = {_NOW}, url = $2",
                            instance, url)

    async def forget_instance(self, instance: str) -> None:
        # The instance's own row stays: its URL is advertised for a while yet (it may be
        # restarting), and the sweep drops it later (purge_expired).
        await self._execute("DELETE FROM presence WHERE instance = $1", instance)

    async def instance_urls(self, *, within_s: float) -> list[str]:
        rows = await self._fetch("SELECT DISTINCT url FROM instances WHERE url IS NOT NULL "
                                 f"AND seen > {_NOW} - $1 ORDER BY url", within_s)
        return [row[0] for row in rows]

    async def set_presence(self, aid: str, instance: str) -> None:
        await self._execute(f"INSERT INTO presence (aid, instance, since) VALUES ($1, $2, {_NOW}) "
                            "ON CONFLICT (aid) DO UPDATE SET instance = excluded.instance, "
                            "since = excluded.since", aid, instance)

    async def clear_presence(self, aid: str, instance: str) -> None:
        await self._execute("DELETE FROM presence WHERE aid = $1 AND instance = $2", aid,
                            instance)

    async def present(self, aids: list[str], *, within_s: float) -> set[str]:
        """Those of ``aids`` held by an instance seen in the last ``within_s`` seconds (an
        instance killed without a goodbye stops counting then)."""
        rows = await self._fetch(
            "SELECT p.aid FROM presence p JOIN instances i ON i.id = p.instance "
            f"WHERE p.aid = ANY($1::text[]) AND i.seen > {_NOW} - $2", aids, within_s)
        return {row[0] for row in rows}

    async def forget_full_buckets(self, rate: float, burst: int) -> int:
        status = await self._execute(
            f"DELETE FROM rate_buckets WHERE tokens + ({_NOW} - stamp) * $1 >= $2", rate,
            float(burst))
        return int(status.split()[-1])


def _describe(error: BaseException) -> str:
    return str(error) or type(error).__name__
