"""The ledger (anet_hub.ledger) in the embedded storage's SQLite file.

Each method is one ``BEGIN IMMEDIATE`` transaction of :class:`anet_hub.sqlite.SqliteHubStorage`
on its worker thread: SQLite lets one writer in at a time, across processes too (``anet hub
credit`` while the hub runs), so a debit checks and changes the balance with nothing in
between, and a settlement and a void of one nonce each see the other's row or none.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Awaitable, Callable
from typing import Protocol, TypeVar

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
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    kind TEXT NOT NULL CHECK (kind IN ('credit', 'transfer')),
    payer TEXT,
    payee TEXT NOT NULL,
    asset TEXT NOT NULL,
    amount INTEGER NOT NULL CHECK (amount > 0),
    transaction_id TEXT NOT NULL UNIQUE,
    created REAL NOT NULL,
    nonce TEXT,
    task TEXT,
    authorization_doc TEXT,
    settlement_doc TEXT,
    UNIQUE (payer, nonce)
);
CREATE INDEX IF NOT EXISTS ledger_entries_by_payee ON ledger_entries (payee, seq);
CREATE TABLE IF NOT EXISTS ledger_balances (
    aid TEXT NOT NULL,
    asset TEXT NOT NULL,
    amount INTEGER NOT NULL CHECK (amount >= 0),
    PRIMARY KEY (aid, asset)
);
CREATE TABLE IF NOT EXISTS ledger_voids (
    payer TEXT NOT NULL,
    nonce TEXT NOT NULL,
    task TEXT NOT NULL,
    created REAL NOT NULL,
    PRIMARY KEY (payer, nonce)
) WITHOUT ROWID;
"""


class Transact(Protocol):
    def __call__(self, fn: Callable[[sqlite3.Connection], T]) -> Awaitable[T]: ...


def _balance(conn: sqlite3.Connection, aid: str, asset: str) -> int:
    row = conn.execute("SELECT amount FROM ledger_balances WHERE aid = ? AND asset = ?",
                       (aid, asset)).fetchone()
    return int(row[0]) if row else 0


def _add(conn: sqlite3.Connection, aid: str, asset: str, amount: int) -> None:
    conn.execute("INSERT INTO ledger_balances (aid, asset, amount) VALUES (?, ?, ?) "
                 "ON CONFLICT (aid, asset) DO UPDATE SET amount = amount + excluded.amount",
                 (aid, asset, amount))


def _entry(conn: sqlite3.Connection, seq: int) -> LedgerEntry:
    return entry_from_row(conn.execute(f"SELECT {ENTRY_COLUMNS} FROM ledger_entries "
                                       "WHERE seq = ?", (seq,)).fetchone())


def _decision(conn: sqlite3.Connection, payer: str, nonce: str) -> Decision | None:
    row = conn.execute(f"SELECT {ENTRY_COLUMNS} FROM ledger_entries WHERE payer = ? "
                       "AND nonce = ?", (payer, nonce)).fetchone()
    if row is not None:
        return AlreadySettled(entry_from_row(row))
    row = conn.execute("SELECT created, task FROM ledger_voids WHERE payer = ? AND nonce = ?",
                       (payer, nonce)).fetchone()
    return Voided(at=row[0], task=row[1]) if row else None


class SqliteLedger:
    def __init__(self, transact: Transact) -> None:
        self._transact = transact

    async def credit(self, aid: str, asset: str, amount: int, *, transaction: str,
                     now: float) -> LedgerEntry:
        def credit(conn: sqlite3.Connection) -> LedgerEntry:
            balance = _balance(conn, aid, asset)
            if balance + amount > MAX_BALANCE:
                raise BalanceLimit(balance)
            cursor = conn.execute(
                "INSERT INTO ledger_entries (kind, payee, asset, amount, transaction_id, "
                "created) VALUES (?, ?, ?, ?, ?, ?)",
                (EntryKind.CREDIT.value, aid, asset, amount, transaction, now))
            _add(conn, aid, asset, amount)
            return _entry(conn, int(cursor.lastrowid or 0))

        return await self._transact(credit)

    async def settle(self, transfer: Transfer) -> SettleOutcome:
        def settle(conn: sqlite3.Connection) -> SettleOutcome:
            decided = _decision(conn, transfer.payer, transfer.nonce)
            if decided is not None:
                return decided
            balance = _balance(conn, transfer.payer, transfer.asset)
            if balance < transfer.amount:
                return Insufficient(balance)
            payee_balance = _balance(conn, transfer.payee, transfer.asset)
            if payee_balance + transfer.amount > MAX_BALANCE and transfer.payee != transfer.payer:
                return PayeeFull(payee_balance)
            cursor = conn.execute(
                "INSERT INTO ledger_entries (kind, payer, payee, asset, amount, transaction_id, "
                "created, nonce, task, authorization_doc, settlement_doc) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (EntryKind.TRANSFER.value, transfer.payer, transfer.payee, transfer.asset,
                 transfer.amount, transfer.transaction, transfer.created, transfer.nonce,
                 transfer.task, json.dumps(transfer.authorization),
                 json.dumps(transfer.settlement)))
            conn.execute("UPDATE ledger_balances SET amount = amount - ? WHERE aid = ? "
                         "AND asset = ?", (transfer.amount, transfer.payer, transfer.asset))
            _add(conn, transfer.payee, transfer.asset, transfer.amount)
            return Settled(_entry(conn, int(cursor.lastrowid or 0)))

        return await self._transact(settle)

    async def void(self, payer: str, nonce: str, *, task: str, now: float) -> Decision:
        def void(conn: sqlite3.Connection) -> Decision:
            decided = _decision(conn, payer, nonce)
            if decided is not None:
                return decided
            conn.execute("INSERT INTO ledger_voids (payer, nonce, task, created) "
                         "VALUES (?, ?, ?, ?)", (payer, nonce, task, now))
            return Voided(at=now, task=task)

        return await self._transact(void)

    async def decision(self, payer: str, nonce: str) -> Decision | None:
        return await self._transact(lambda conn: _decision(conn, payer, nonce))

    async def balance(self, aid: str, asset: str) -> int:
        return await self._transact(lambda conn: _balance(conn, aid, asset))

    async def balances(self, aid: str | None = None) -> list[Balance]:
        def read(conn: sqlite3.Connection) -> list[Balance]:
            where, params = ("WHERE aid = ?", (aid,)) if aid is not None else ("", ())
            rows = conn.execute(f"SELECT aid, asset, amount FROM ledger_balances {where} "
                                "ORDER BY aid, asset", params).fetchall()
            return [Balance(row[0], row[1], int(row[2])) for row in rows]

        return await self._transact(read)

    async def entries(self, *, after_seq: int = 0, limit: int = 1000,
                      aid: str | None = None) -> list[LedgerEntry]:
        def read(conn: sqlite3.Connection) -> list[LedgerEntry]:
            of_aid, params = ("AND (payer = ? OR payee = ?)", (aid, aid)) if aid else ("", ())
            rows = conn.execute(f"SELECT {ENTRY_COLUMNS} FROM ledger_entries WHERE seq > ? "
                                f"{of_aid} ORDER BY seq LIMIT ?",
                                (after_seq, *params, limit)).fetchall()
            return [entry_from_row(row) for row in rows]

        return await self._transact(read)
