"""The ledger (anet_hub.ledger) in a cluster's PostgreSQL, shared by every instance of the hub.

Each method is one transaction on a pooled connection of
:class:`anet_hub.postgres.PostgresHubStorage`. Two instances settling the same authorization
at once insert the same ``(payer, nonce)``: the database lets one in and makes the other wait
for it, then see its entry (``ON CONFLICT DO NOTHING``), so the amount moves once. A settlement
and a void of one nonce write different tables, so each first takes the transaction lock of
``(payer, nonce)``: the second waits for the first's commit, then reads it (each statement of
READ COMMITTED sees what committed before it began). Balances are locked in AID order before
they change, so two transfers in opposite directions never deadlock.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

import asyncpg

from anet_hub.ledger import (
    ENTRY_COLUMNS,
    MAX_BALANCE,
    AlreadySettled,
    Balance,
    BalanceLimit,
    Decision,
    EntryKind,
    Insufficient,
    LedgerEntry,
    PayeeFull,
    Settled,
    SettleOutcome,
    Transfer,
    Voided,
    entry_from_row,
)

T = TypeVar("T")

LEDGER_SCHEMA = """
CREATE TABLE IF NOT EXISTS ledger_entries (
    seq BIGSERIAL PRIMARY KEY,
    kind TEXT NOT NULL CHECK (kind IN ('credit', 'transfer')),
    payer TEXT COLLATE "C",
    payee TEXT COLLATE "C" NOT NULL,
    asset TEXT NOT NULL,
    amount BIGINT NOT NULL CHECK (amount > 0),
    transaction_id TEXT NOT NULL UNIQUE,
    created DOUBLE PRECISION NOT NULL,
    nonce TEXT,
    task TEXT,
    authorization_doc TEXT,
    settlement_doc TEXT,
    UNIQUE (payer, nonce)
);
CREATE INDEX IF NOT EXISTS ledger_entries_by_payee ON ledger_entries (payee, seq);
CREATE TABLE IF NOT EXISTS ledger_balances (
    aid TEXT COLLATE "C" NOT NULL,
    asset TEXT NOT NULL,
    amount BIGINT NOT NULL CHECK (amount >= 0),
    PRIMARY KEY (aid, asset)
);
CREATE TABLE IF NOT EXISTS ledger_voids (
    payer TEXT COLLATE "C" NOT NULL,
    nonce TEXT NOT NULL,
    task TEXT NOT NULL,
    created DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (payer, nonce)
);
"""


class Run(Protocol):
    def __call__(self, fn: Callable[[asyncpg.Connection], Awaitable[T]]) -> Awaitable[T]: ...


async def _entry(conn: asyncpg.Connection, where: str, *args: object) -> LedgerEntry | None:
    row = await conn.fetchrow(f"SELECT {ENTRY_COLUMNS} FROM ledger_entries WHERE {where}", *args)
    return entry_from_row(row) if row else None


async def _add(conn: asyncpg.Connection, aid: str, asset: str, amount: int) -> None:
    await conn.execute("INSERT INTO ledger_balances (aid, asset, amount) VALUES ($1, $2, $3) "
                       "ON CONFLICT (aid, asset) DO UPDATE SET "
                       "amount = ledger_balances.amount + excluded.amount", aid, asset, amount)


async def _decide_alone(conn: asyncpg.Connection, payer: str, nonce: str) -> None:
    """Take the lock of ``(payer, nonce)`` until the transaction ends (a statement of its
    own: the next one reads what committed while it waited)."""
    await conn.execute("SELECT pg_advisory_xact_lock(hashtextextended($1, 0))",
                       f"{payer} {nonce}")


async def _decision(conn: asyncpg.Connection, payer: str, nonce: str) -> Decision | None:
    original = await _entry(conn, "payer = $1 AND nonce = $2", payer, nonce)
    if original is not None:
        return AlreadySettled(original)
    row = await conn.fetchrow("SELECT created, task FROM ledger_voids WHERE payer = $1 "
                              "AND nonce = $2", payer, nonce)
    return Voided(at=row["created"], task=row["task"]) if row else None


class PostgresLedger:
    def __init__(self, run: Run) -> None:
        self._run = run

    async def credit(self, aid: str, asset: str, amount: int, *, transaction: str,
                     now: float) -> LedgerEntry:
        async def credit(conn: asyncpg.Connection) -> LedgerEntry:
            async with conn.transaction():
                # Creates the row when it is missing, and locks it either way.
                balance = await conn.fetchval(
                    "INSERT INTO ledger_balances (aid, asset, amount) VALUES ($1, $2, 0) "
                    "ON CONFLICT (aid, asset) DO UPDATE SET amount = ledger_balances.amount "
                    "RETURNING amount", aid, asset)
                if balance + amount > MAX_BALANCE:
                    raise BalanceLimit(int(balance))
                seq = await conn.fetchval(
                    "INSERT INTO ledger_entries (kind, payee, asset, amount, transaction_id, "
                    "created) VALUES ($1, $2, $3, $4, $5, $6) RETURNING seq",
                    EntryKind.CREDIT.value, aid, asset, amount, transaction, now)
                await _add(conn, aid, asset, amount)
                entry = await _entry(conn, "seq = $1", seq)
            assert entry is not None
            return entry

        return await self._run(credit)

    async def settle(self, transfer: Transfer) -> SettleOutcome:
        async def settle(conn: asyncpg.Connection) -> SettleOutcome:
            async with conn.transaction():
                # First the nonce: a second settlement or a void of it waits here for the
                # first one's transaction, holding nothing else, then finds its row.
                await _decide_alone(conn, transfer.payer, transfer.nonce)
                decided = await _decision(conn, transfer.payer, transfer.nonce)
                if decided is not None:
                    return decided
                seq = await conn.fetchval(
                    "INSERT INTO ledger_entries (kind, payer, payee, asset, amount, "
                    "transaction_id, created, nonce, task, authorization_doc, settlement_doc) "
                    "VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) "
                    "ON CONFLICT (payer, nonce) DO NOTHING RETURNING seq",
                    EntryKind.TRANSFER.value, transfer.payer, transfer.payee, transfer.asset,
                    transfer.amount, transfer.transaction, transfer.created, transfer.nonce,
                    transfer.task, json.dumps(transfer.authorization),
                    json.dumps(transfer.settlement))
                if seq is None:
                    original = await _entry(conn, "payer = $1 AND nonce = $2", transfer.payer,
                                            transfer.nonce)
                    assert original is not None
                    return AlreadySettled(original)
                rows = await conn.fetch(
                    "SELECT aid, amount FROM ledger_balances WHERE asset = $1 "
                    "AND aid = ANY($2::text[]) ORDER BY aid FOR UPDATE", transfer.asset,
                    sorted({transfer.payer, transfer.payee}))
                held = {row["aid"]: int(row["amount"]) for row in rows}
                outcome: SettleOutcome | None = None
                if held.get(transfer.payer, 0) < transfer.amount:
                    outcome = Insufficient(held.get(transfer.payer, 0))
                elif (transfer.payee != transfer.payer
                      and held.get(transfer.payee, 0) + transfer.amount > MAX_BALANCE):
                    outcome = PayeeFull(held.get(transfer.payee, 0))
                if outcome is not None:
                    raise _Refused(outcome)
                await conn.execute("UPDATE ledger_balances SET amount = amount - $1 "
                                   "WHERE aid = $2 AND asset = $3", transfer.amount,
                                   transfer.payer, transfer.asset)
                await _add(conn, transfer.payee, transfer.asset, transfer.amount)
                entry = await _entry(conn, "seq = $1", seq)
            assert entry is not None
            return Settled(entry)

        try:
            return await self._run(settle)
        except _Refused as refused:  # the transaction rolled back: the entry is gone
            return refused.outcome

    async def void(self, payer: str, nonce: str, *, task: str, now: float) -> Decision:
        async def void(conn: asyncpg.Connection) -> Decision:
            async with conn.transaction():
                await _decide_alone(conn, payer, nonce)
                decided = await _decision(conn, payer, nonce)
                if decided is not None:
                    return decided
                await conn.execute("INSERT INTO ledger_voids (payer, nonce, task, created) "
                                   "VALUES ($1, $2, $3, $4)", payer, nonce, task, now)
            return Voided(at=now, task=task)

        return await self._run(void)

    async def decision(self, payer: str, nonce: str) -> Decision | None:
        async def read(conn: asyncpg.Connection) -> Decision | None:
            return await _decision(conn, payer, nonce)

        return await self._run(read)

    async def balance(self, aid: str, asset: str) -> int:
        async def read(conn: asyncpg.Connection) -> int:
            amount = await conn.fetchval("SELECT amount FROM ledger_balances WHERE aid = $1 "
                                         "AND asset = $2", aid, asset)
            return int(amount or 0)

        return await self._run(read)

    async def balances(self, aid: str | None = None) -> list[Balance]:
        async def read(conn: asyncpg.Connection) -> list[Balance]:
            rows = await conn.fetch("SELECT aid, asset, amount FROM ledger_balances "
                                    "WHERE $1::text IS NULL OR aid = $1 ORDER BY aid, asset", aid)
            return [Balance(row[0], row[1], int(row[2])) for row in rows]

        return await self._run(read)

    async def entries(self, *, after_seq: int = 0, limit: int = 1000,
                      aid: str | None = None) -> list[LedgerEntry]:
        async def read(conn: asyncpg.Connection) -> list[LedgerEntry]:
            rows = await conn.fetch(f"SELECT {ENTRY_COLUMNS} FROM ledger_entries WHERE seq > $1 "
                                    "AND ($3::text IS NULL OR payer = $3 OR payee = $3) "
                                    "ORDER BY seq LIMIT $2", after_seq, limit, aid)
            return [entry_from_row(row) for row in rows]

        return await self._run(read)


class _Refused(Exception):
    """Carries a refusal out of the transaction, which rolls it back."""

    def __init__(self, outcome: SettleOutcome) -> None:
        super().__init__(type(outcome).__name__)
        self.outcome = outcome
