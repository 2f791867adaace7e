"""The payee's book of payments, one row per paid task, in the module's own SQLite file
(``<data dir>/modules/x402/payments.sqlite``).

A row is written when a payment verified (the option chosen, the payload), before each
settlement attempt (the work's end, so a restart can finish the task) and after it (each
receipt appended, never replaced). Its ``status`` says how far the payment got:
``verified`` → ``settling`` → ``settled`` or ``failed``.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any

from anet_core.api import private_dir

SCHEMA = """
CREATE TABLE IF NOT EXISTS payments (
    task_id TEXT PRIMARY KEY,
    peer TEXT NOT NULL,
    status TEXT NOT NULL,
    accepted TEXT NOT NULL,
    payload TEXT NOT NULL,
    receipts TEXT NOT NULL DEFAULT '[]',
    outcome TEXT,
    error TEXT,
    updated_at REAL NOT NULL
)
"""


class PaymentStatus(StrEnum):
    VERIFIED = "verified"
    SETTLING = "settling"
    SETTLED = "settled"
    FAILED = "failed"


@dataclass
class Payment:
    task_id: str
    peer: str
    status: PaymentStatus
    accepted: dict[str, Any]
    payload: dict[str, Any]
    receipts: list[dict[str, Any]] = field(default_factory=list)
    outcome: dict[str, Any] | None = None
    error: str | None = None


class PaymentBook:
    def __init__(self, path: Path) -> None:
        private_dir(path.parent)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")  # a settled payment survives a power cut
        self._db.execute(SCHEMA)

    def close(self) -> None:
        self._db.close()

    def get(self, task_id: str) -> Payment | None:
        row = self._db.execute(
            "SELECT task_id, peer, status, accepted, payload, receipts, outcome, error "
            "FROM payments WHERE task_id = ?", (task_id,)).fetchone()
        return None if row is None else _payment(row)

    def in_status(self, status: PaymentStatus) -> list[Payment]:
        rows = self._db.execute(
            "SELECT task_id, peer, status, accepted, payload, receipts, outcome, error "
            "FROM payments WHERE status = ? ORDER BY updated_at", (status.value,)).fetchall()
        return [_payment(row) for row in rows]

    def verified(self, task_id: str, peer: str, accepted: dict[str, Any],
                 payload: dict[str, Any]) -> None:
        """A payment verified at its rail: the task goes to the work. A task verified before
        (a fresh payment after a re-quote) takes the new payload."""
        self._db.execute(
            "INSERT INTO payments (task_id, peer, status, accepted, payload, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT(task_id) DO UPDATE SET status = "
            "excluded.status, accepted = excluded.accepted, payload = excluded.payload, "
            "updated_at = excluded.updated_at",
            (task_id, peer, PaymentStatus.VERIFIED.value, json.dumps(accepted),
             json.dumps(payload), time.time()))

    def save(self, payment: Payment) -> None:
        self._db.execute(
            "UPDATE payments SET status = ?, receipts = ?, outcome = ?, error = ?, "
            "updated_at = ? WHERE task_id = ?",
            (payment.status.value, json.dumps(payment.receipts),
             None if payment.outcome is None else json.dumps(payment.outcome), payment.error,
             time.time(), payment.task_id))


def _payment(row: tuple[Any, ...]) -> Payment:
    task_id, peer, status, accepted, payload, receipts, outcome, error = row
    return Payment(task_id=task_id, peer=peer, status=PaymentStatus(status),
                   accepted=json.loads(accepted), payload=json.loads(payload),
                   receipts=json.loads(receipts),
                   outcome=None if outcome is None else json.loads(outcome), error=error)
