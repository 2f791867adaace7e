"""What ``anet.db`` is on disk: its tables, one migration script per schema version, the
connection's pragmas, and :func:`open_store`, which opens the file and brings an older one up
to date."""

from __future__ import annotations

import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from pathlib import Path

from anet_core.store.database import Store
from anet_core.store.rows import StoreError

MIGRATIONS: tuple[str, ...] = (
    # version 1
    """
    CREATE TABLE tasks (
        id            TEXT PRIMARY KEY,
        role          TEXT NOT NULL CHECK (role IN ('requester', 'provider')),
        peer_aid      TEXT NOT NULL,
        context_id    TEXT NOT NULL,
        state         TEXT NOT NULL,
        state_seq     INTEGER NOT NULL DEFAULT 0,
        skill         TEXT,
        task_json     TEXT NOT NULL,
        receipt_json  TEXT,
        served_by     TEXT,
        created_at    REAL NOT NULL,
        updated_at    REAL NOT NULL,
        last_heard_at REAL NOT NULL
    );
    CREATE INDEX tasks_by_peer ON tasks (role, peer_aid, updated_at DESC, id DESC);
    CREATE INDEX tasks_by_state ON tasks (role, state);

    -- (contextId, messageId) of every message sent or received, per peer and side: the
    -- idempotency key that makes a repeated message return its task instead of a second send.
    CREATE TABLE messages (
        role        TEXT NOT NULL,
        peer_aid    TEXT NOT NULL,
        context_id  TEXT NOT NULL,
        message_id  TEXT NOT NULL,
        task_id     TEXT NOT NULL REFERENCES tasks (id),
        created_at  REAL NOT NULL,
        PRIMARY KEY (role, peer_aid, context_id, message_id)
    );

    -- Task messages not yet accepted by the hub. The body is sealed on the first attempt and
    -- the envelope kept, so every retry sends the same envelope id (the receiver drops repeats).
    CREATE TABLE outbox (
        seq             INTEGER PRIMARY KEY AUTOINCREMENT,
        peer_aid        TEXT NOT NULL,
        task_id         TEXT NOT NULL,
        body_json       TEXT NOT NULL,
        envelope_id     TEXT UNIQUE,
        envelope_json   TEXT,
        created_at      REAL NOT NULL,
        attempts        INTEGER NOT NULL DEFAULT 0,
        next_attempt_at REAL NOT NULL,
        last_error      TEXT
    );
    CREATE INDEX outbox_by_task ON outbox (task_id);

    -- Ids of envelopes already opened: a replay is dropped. Kept until the envelope would have
    -- expired anyway (open_envelope refuses older ones).
    CREATE TABLE seen_envelopes (
        envelope_id TEXT PRIMARY KEY,
        sender      TEXT NOT NULL,
        expires_at  REAL NOT NULL
    );
    CREATE INDEX seen_by_expiry ON seen_envelopes (expires_at);

    -- Task updates that arrived ahead of a gap in anet.state_seq, applied once the gap fills.
    CREATE TABLE pending_updates (
        task_id    TEXT NOT NULL,
        state_seq  INTEGER NOT NULL,
        body_json  TEXT NOT NULL,
        PRIMARY KEY (task_id, state_seq)
    );

    CREATE TABLE trust (
        aid      TEXT PRIMARY KEY,
        added_at REAL NOT NULL
    );

    CREATE TABLE settings (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );

    -- Provider tasks no module took: they wait for the operator (anet inbox / anet reply).
    CREATE TABLE inbox (
        task_id    TEXT PRIMARY KEY REFERENCES tasks (id),
        arrived_at REAL NOT NULL
    );
    """,
    # version 2
    """
    -- Evidence records the daemon made that its chain may not hold on disk yet: committed
    -- before anyone is told of what they record, kept until the chain is synced
    -- (EvidenceChain in anet_core/evidence/chain.py).
    CREATE TABLE evidence_journal (
        id        INTEGER PRIMARY KEY,
        ts        INTEGER NOT NULL,
        kind      TEXT NOT NULL,
        data_json TEXT NOT NULL
    );
    """,
    # version 3
    """
    -- An open requester task says anet.effect_status "possible" (docs/mcp.md): its message is
    -- on its way or arrived. Versions before said "none" until the hub accepted the message.
    UPDATE tasks SET task_json = json_set(task_json, '$.metadata."anet.effect_status"', 'possible')
    WHERE role = 'requester'
      AND state NOT IN ('TASK_STATE_COMPLETED', 'TASK_STATE_FAILED', 'TASK_STATE_CANCELED',
                        'TASK_STATE_REJECTED')
      AND json_extract(task_json, '$.metadata."anet.effect_status"') = 'none';
    """,
    # version 4
    """
    -- Tables found by their key alone keep their rows in that key's B-tree (WITHOUT ROWID):
    -- an insert writes one B-tree, not a table and its key's index beside it, and a task's
    -- message and each opened envelope cost one page less (docs/performance.md, "The
    -- eighteenth pass").
    CREATE TABLE messages_by_key (
        role        TEXT NOT NULL,
        peer_aid    TEXT NOT NULL,
        context_id  TEXT NOT NULL,
        message_id  TEXT NOT NULL,
        task_id     TEXT NOT NULL REFERENCES tasks (id),
        created_at  REAL NOT NULL,
        PRIMARY KEY (role, peer_aid, context_id, message_id)
    ) WITHOUT ROWID;
    INSERT INTO messages_by_key SELECT role, peer_aid, context_id, message_id, task_id, created_at
        FROM messages;
    DROP TABLE messages;
    ALTER TABLE messages_by_key RENAME TO messages;

    CREATE TABLE seen_by_id (
        envelope_id TEXT PRIMARY KEY,
        sender      TEXT NOT NULL,
        expires_at  REAL NOT NULL
    ) WITHOUT ROWID;
    INSERT INTO seen_by_id SELECT envelope_id, sender, expires_at FROM seen_envelopes;
    DROP TABLE seen_envelopes;
    ALTER TABLE seen_by_id RENAME TO seen_envelopes;
    CREATE INDEX seen_by_expiry ON seen_envelopes (expires_at);
    """,
)

SCHEMA_VERSION = len(MIGRATIONS)


def _connect(path: Path) -> sqlite3.Connection:
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    # isolation_level=None: no implicit transactions; Store.transaction() opens them explicitly.
    connection = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    connection.row_factory = sqlite3.Row
    connection.execute("PRAGMA journal_mode = WAL")
    connection.execute("PRAGMA synchronous = NORMAL")
    connection.execute("PRAGMA foreign_keys = ON")
    connection.execute("PRAGMA busy_timeout = 5000")
    return connection


def migrate(connection: sqlite3.Connection, path: Path) -> int:
    """Bring the schema to :data:`SCHEMA_VERSION`; return the version found before."""
    found = connection.execute("PRAGMA user_version").fetchone()[0]
    if found > SCHEMA_VERSION:
        raise StoreError("store-too-new",
                         f"{path} has schema version {found}; this anet knows up to "
                         f"{SCHEMA_VERSION}", hint="upgrade anet, or move the file away")
    for version in range(found + 1, SCHEMA_VERSION + 1):
        connection.execute("BEGIN IMMEDIATE")
        try:
            for statement in _statements(MIGRATIONS[version - 1]):
                connection.execute(statement)
            connection.execute(f"PRAGMA user_version = {version}")
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")
    return found


def _statements(script: str) -> list[str]:
    """Split a migration script; executescript() would commit the transaction it runs in."""
    statements, current = [], ""
    for line in script.splitlines():
        if line.strip().startswith("--"):
            continue
        current += line + "\n"
        if sqlite3.complete_statement(current):
            statements.append(current.strip())
            current = ""
    return statements


@asynccontextmanager
async def open_store(path: Path) -> AsyncIterator[Store]:
    """Open (creating or migrating) the store at ``path``; closed on the way out."""
    try:
        connection = _connect(Path(path))
        migrate(connection, Path(path))
    except sqlite3.DatabaseError as error:
        raise StoreError("store-unusable", f"{path} cannot be opened as the node's database: "
                                           f"{error}",
                         hint="check the disk and the file's permissions; a damaged file can be "
                              "moved away, which forgets tasks, trust list and policy") from None
    store = Store(connection, Path(path))
    try:
        yield store
    finally:
        with suppress(sqlite3.Error):  # else the next start sends them again, to no effect
            store.outbox_forget_taken()
        connection.close()
