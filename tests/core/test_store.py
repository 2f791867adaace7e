"""The SQLite store: schema versions, transactions, keys, outbox order, replay ids, paging."""

from __future__ import annotations

import asyncio
import json
import sqlite3
import time
from pathlib import Path

import pytest

from anet_core.store import (
    MIGRATIONS,
    SCHEMA_VERSION,
    StoredTask,
    StoreError,
    TaskRole,
    open_store,
)
from anet_core.tasks.policy import InboundPolicy, policy_in


def task(task_id: str, updated_at: float, *, role: TaskRole = TaskRole.REQUESTER) -> StoredTask:
    return StoredTask(id=task_id, role=role, peer_aid="p" * 32, context_id="ctx",
                      state="TASK_STATE_SUBMITTED", state_seq=0, skill=None,
                      task={"id": task_id, "status": {"state": "TASK_STATE_SUBMITTED"}},
                      receipt=None, served_by=None, created_at=updated_at,
                      updated_at=updated_at, last_heard_at=updated_at)


async def test_schema_version_and_reopen(tmp_path: Path) -> None:
    path = tmp_path / "anet.db"
    async with open_store(path) as store:
        with store.transaction():
            store.insert_task(task("t-00000001", 1.0))
            store.set_inbound_policy(InboundPolicy.OPEN)
    connection = sqlite3.connect(path)
    assert connection.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    assert connection.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    connection.close()
    async with open_store(path) as store:
        assert store.get_task("t-00000001") is not None
        assert policy_in(store) is InboundPolicy.OPEN


async def test_open_tasks_an_older_version_stored_say_possible(tmp_path: Path) -> None:
    # Version 2 said "none" until the hub accepted a task's message; an open task says
    # "possible" now (docs/mcp.md), a task that ended keeps what it said.
    path = tmp_path / "anet.db"
    connection = sqlite3.connect(path, isolation_level=None)
    for script in MIGRATIONS[:2]:
        connection.executescript(script)
    connection.execute("PRAGMA user_version = 2")
    states = {"t-open0001": "TASK_STATE_SUBMITTED", "t-asks0001": "TASK_STATE_INPUT_REQUIRED",
              "t-ended001": "TASK_STATE_CANCELED"}
    for task_id, state in states.items():
        row = task(task_id, 1.0)
        connection.execute(
            "INSERT INTO tasks (id, role, peer_aid, context_id, state, task_json, created_at,"
            " updated_at, last_heard_at) VALUES (?, 'requester', ?, 'ctx', ?, ?, 1, 1, 1)",
            (task_id, row.peer_aid, state, json.dumps(
                {"id": task_id, "status": {"state": state},
                 "metadata": {"anet.effect_status": "none", "anet.state_seq": 0}})))
    connection.close()
    async with open_store(path) as store:
        said = {task_id: store.get_task(task_id).task["metadata"] for task_id in states}
    assert said == {"t-open0001": {"anet.effect_status": "possible", "anet.state_seq": 0},
                    "t-asks0001": {"anet.effect_status": "possible", "anet.state_seq": 0},
                    "t-ended001": {"anet.effect_status": "none", "anet.state_seq": 0}}


async def test_the_keys_of_an_older_version_are_kept_in_tables_without_rowid(
        tmp_path: Path) -> None:
    # Version 4 rebuilt the tables found by their key alone: what version 3 held is all there,
    # found and refused as before.
    path = tmp_path / "anet.db"
    connection = sqlite3.connect(path, isolation_level=None)
    for script in MIGRATIONS[:3]:
        connection.executescript(script)
    connection.execute("PRAGMA user_version = 3")
    connection.execute(
        "INSERT INTO tasks (id, role, peer_aid, context_id, state, task_json, created_at,"
        " updated_at, last_heard_at) VALUES ('t-kept0001', 'provider', 'peer', 'ctx',"
        " 'TASK_STATE_SUBMITTED', '{}', 1, 1, 1)")
    connection.execute("INSERT INTO messages VALUES ('provider', 'peer', 'ctx', 'm-1',"
                       " 't-kept0001', 1)")
    connection.execute("INSERT INTO seen_envelopes VALUES ('e-1', 'peer', 100)")
    connection.close()
    async with open_store(path) as store:
        assert store.message_task(TaskRole.PROVIDER, "peer", "ctx", "m-1") == "t-kept0001"
        assert store.was_seen("e-1") and not store.mark_seen("e-1", "peer", 100)
        assert store.mark_seen("e-2", "peer", 200)
        assert store.forget_expired_envelopes(150) == 1 and not store.was_seen("e-1")
    connection = sqlite3.connect(path)
    tables = dict(connection.execute("SELECT name, sql FROM sqlite_master WHERE type = 'table'"))
    indexes = {name for (name,) in connection.execute(
        "SELECT name FROM sqlite_master WHERE type = 'index'")}
    connection.close()
    assert tables["messages"].endswith("WITHOUT ROWID")
    assert tables["seen_envelopes"].endswith("WITHOUT ROWID")
    assert "seen_by_expiry" in indexes and not {"messages_by_key", "seen_by_id"} & set(tables)


async def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "anet.db"
    connection = sqlite3.connect(path)
    connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    connection.close()
    with pytest.raises(StoreError, match="knows up to"):
        async with open_store(path):
            pass


async def test_transaction_is_all_or_nothing(tmp_path: Path) -> None:
    async with open_store(tmp_path / "anet.db") as store:
        assert store.inbound_policy is None and policy_in(store) is InboundPolicy.TRUSTED
        with pytest.raises(RuntimeError), store.transaction():
            store.insert_task(task("t-00000001", 1.0))
            store.add_message(TaskRole.REQUESTER, "p" * 32, "ctx", "m-1", "t-00000001")
            raise RuntimeError("crash in the middle")
        assert store.get_task("t-00000001") is None
        assert store.message_task(TaskRole.REQUESTER, "p" * 32, "ctx", "m-1") is None


async def test_role_and_peer_scope_lookups(tmp_path: Path) -> None:
    async with open_store(tmp_path / "anet.db") as store:
        store.insert_task(task("t-00000001", 1.0))
        assert store.get_task("t-00000001", peer_aid="q" * 32) is None
        assert store.get_task("t-00000001", role=TaskRole.PROVIDER) is None
        assert store.get_task("t-00000001", role=TaskRole.REQUESTER, peer_aid="p" * 32)
        assert store.has_tasks(TaskRole.REQUESTER, "p" * 32)
        assert not store.has_tasks(TaskRole.PROVIDER, "p" * 32)
        assert not store.has_tasks(TaskRole.REQUESTER, "q" * 32)


async def test_outbox_keeps_order_and_envelope(tmp_path: Path) -> None:
    async with open_store(tmp_path / "anet.db") as store:
        for n in range(3):
            store.enqueue("p" * 32, {"n": n}, task_id="t")
        first, *_ = store.outbox_due(time.time())
        store.outbox_sealed(first.seq, "env-1", '{"id":"env-1"}')
        store.outbox_retry_later(first.seq, time.time() + 60, "hub-unreachable")
        assert store.outbox_due(time.time()) == []  # nothing overtakes a waiting entry
        again = store.outbox_due(time.time() + 61)
        assert [entry.body["n"] for entry in again] == [0, 1, 2]
        assert again[0].envelope == '{"id":"env-1"}' and again[0].envelope_id == "env-1"
        assert again[0].attempts == 1
        assert not store.outbox_only_unsent("t")  # the first one was sealed for an attempt
        assert store.outbox_withdraw("t") == 3 and store.outbox_next_attempt() is None


async def test_an_envelope_sealed_ahead_is_unsent_until_its_attempt(tmp_path: Path) -> None:
    async with open_store(tmp_path / "anet.db") as store:
        store.enqueue("p" * 32, {"n": 0}, task_id="t", envelope={"id": "env-1"})
        entry, = store.outbox_due(time.time())
        assert entry.envelope == '{"id":"env-1"}'  # compact, as it is sent
        assert store.outbox_only_unsent("t")  # sealed, never handed to the hub
        store.outbox_attempt(entry.seq)
        assert not store.outbox_only_unsent("t")
        store.outbox_done(entry.seq)
        assert not store.outbox_only_unsent("t")  # the hub took it
        store.enqueue("p" * 32, {"n": 1}, task_id="u", envelope={"id": "env-2"})
        store.enqueue("p" * 32, {"n": 2}, task_id="w")
        assert store.outbox_only_unsent("u") and store.outbox_only_unsent("w")
    async with open_store(tmp_path / "anet.db") as store:
        # after a restart nothing says it was not sent: it counts as maybe sent
        assert not store.outbox_only_unsent("u")
        assert store.outbox_only_unsent("w")  # never sealed, so never sent


async def test_an_entry_the_hub_took_is_deleted_by_the_next_transaction(tmp_path: Path) -> None:
    path = tmp_path / "anet.db"

    def rows() -> list[int]:  # what another reader of the file sees
        with sqlite3.connect(path) as reader:
            return [row[0] for row in reader.execute("SELECT seq FROM outbox ORDER BY seq")]

    async with open_store(path) as store:
        with store.transaction():
            for n in range(3):
                store.enqueue("p" * 32, {"n": n}, task_id=f"t{n}", envelope={"id": f"env-{n}"})
        first, second, third = store.outbox_due(time.time())
        store.outbox_attempt(first.seq)
        store.outbox_taken(first.seq)  # no commit of its own
        assert rows() == [first.seq, second.seq, third.seq]
        assert [entry.seq for entry in store.outbox_due(time.time())] == [second.seq, third.seq]
        assert store.outbox_depth() == 2 and not store.outbox_only_unsent("t0")
        store.outbox_taken(second.seq)
        with pytest.raises(RuntimeError), store.transaction():
            store.trust("a" * 32)
            raise RuntimeError("crash in the middle")
        assert rows() == [first.seq, second.seq, third.seq]  # the rollback kept them
        with store.transaction(durable=False):
            store.trust("a" * 32)  # any transaction takes them along
        assert rows() == [third.seq] and store.outbox_next_attempt() is not None
        store.outbox_taken(third.seq)
        assert store.outbox_next_attempt() is None and store.outbox_due(time.time()) == []
    assert rows() == []  # the store deleted the last one as it closed


async def test_a_flush_that_may_wait_shares_the_next_sync_or_makes_its_own(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``flush(within)``: durable once a sync made anyway covers its commits (one fsync for
    both), or by a sync of its own once ``within`` passed; at once when nothing is unsynced."""
    async with open_store(tmp_path / "anet.db") as store:
        syncs = 0
        sync_wal = store._sync_wal

        def counted() -> None:
            nonlocal syncs
            syncs += 1
            sync_wal()

        monkeypatch.setattr(store, "_sync_wal", counted)
        with store.transaction(durable=False):
            store.insert_task(task("t-00000001", 1.0))
        waiting = asyncio.ensure_future(store.flush(within=60.0))
        for _ in range(5):
            await asyncio.sleep(0)
        assert not waiting.done() and syncs == 0
        with store.transaction():  # durable: its sync covers the commit before it as well
            store.insert_task(task("t-00000002", 2.0))
        async with asyncio.timeout(10):
            await waiting
        assert syncs == 1

        with store.transaction(durable=False):
            store.insert_task(task("t-00000003", 3.0))
        async with asyncio.timeout(10):
            await store.flush(within=0.01)  # nobody syncs meanwhile: it does
        assert syncs == 2
        await store.flush(within=60.0)  # nothing unsynced
        assert syncs == 2


async def test_seen_envelopes_expire(tmp_path: Path) -> None:
    async with open_store(tmp_path / "anet.db") as store:
        assert store.mark_seen("e1", "p" * 32, expires_at=100.0)
        assert not store.mark_seen("e1", "p" * 32, expires_at=100.0)
        assert store.forget_expired_envelopes(now=50.0) == 0 and store.was_seen("e1")
        assert store.forget_expired_envelopes(now=150.0) == 1 and not store.was_seen("e1")


async def test_pages_newest_first_with_ties(tmp_path: Path) -> None:
    async with open_store(tmp_path / "anet.db") as store:
        for n in range(7):
            store.insert_task(task(f"t-{n:08d}", 10.0 if n < 4 else float(n)))
        page = store.list_tasks(TaskRole.REQUESTER, page_size=3)
        ids = [t.id for t in page.tasks]
        while page.next_page_token:
            page = store.list_tasks(TaskRole.REQUESTER, page_size=3,
                                    page_token=page.next_page_token)
            ids += [t.id for t in page.tasks]
        assert ids == ["t-00000003", "t-00000002", "t-00000001", "t-00000000", "t-00000006",
                       "t-00000005", "t-00000004"]
        assert page.total_size == 7
        assert store.list_tasks(TaskRole.REQUESTER, updated_since=6.0).total_size == 5


async def test_trust_list_and_inbox(tmp_path: Path) -> None:
    async with open_store(tmp_path / "anet.db") as store:
        assert store.trust("a" * 32) and not store.trust("a" * 32)
        assert store.is_trusted("a" * 32) and [aid for aid, _ in store.trusted()] == ["a" * 32]
        assert store.distrust("a" * 32) and not store.distrust("a" * 32)
        store.insert_task(task("t-00000001", 1.0, role=TaskRole.PROVIDER))
        store.to_inbox("t-00000001")
        assert [t.id for t in store.inbox()] == ["t-00000001"]
        store.out_of_inbox("t-00000001")
        assert store.inbox() == []


async def test_the_trust_list_and_the_policy_are_read_once_and_a_rollback_is_not_kept(
        tmp_path: Path) -> None:
    peer = "a" * 32
    async with open_store(tmp_path / "anet.db") as store:
        statements: list[str] = []
        store._db.set_trace_callback(statements.append)
        for _ in range(3):
            assert not store.is_trusted(peer) and store.inbound_policy is None
        assert len(statements) == 2  # a new task asks three times: the store reads once
        with pytest.raises(RuntimeError), store.transaction():
            store.trust(peer)
            store.set_inbound_policy(InboundPolicy.OPEN)
            assert store.is_trusted(peer) and policy_in(store) is InboundPolicy.OPEN
            raise RuntimeError("crash in the middle")
        # The rollback took both writes back: what the store kept of them is forgotten.
        assert not store.is_trusted(peer) and policy_in(store) is InboundPolicy.TRUSTED
        with store.transaction():
            store.trust(peer)
            store.set_inbound_policy(InboundPolicy.CLOSED)
        assert store.is_trusted(peer) and policy_in(store) is InboundPolicy.CLOSED
        assert store.distrust(peer) and not store.is_trusted(peer)


def test_a_task_message_from_a_newer_peer_with_unknown_fields_is_understood() -> None:
    from anet_core.protocol.tasks import TASK_BODY

    body = TASK_BODY.validate_python({
        "type": "task.cancel", "taskId": "t" * 32, "contextId": "c1", "addedLater": {"x": 1}})
    assert body.task_id == "t" * 32 and not hasattr(body, "addedLater")
