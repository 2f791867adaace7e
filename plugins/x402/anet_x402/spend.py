"""What this node signed as a payer: ``<data>/modules/x402/payer.db`` (SQLite).

One row per signed authorization, committed before the payment message leaves, so that

- a retry, a repeated message or a restart re-sends the SAME authorization for a task and option
  (:meth:`PayerBook.reusable`) instead of signing a second one;
- the day's spend (``agent_daily_max``) is the sum of today's rows and survives restarts.

An authorization that expired unused is never re-sent (the hub would refuse it); a new one may
then be signed, and the old one still counts in its day: the book counts what was signed.
"""

from __future__ import annotations

import json
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anet_core.api import DataPaths, canonical_json, private_dir
from anet_x402.tiers import BELOW_THE_OPERATOR, Tier, utc_day

MODULE_DIR = "x402"
SCHEMA = """
CREATE TABLE IF NOT EXISTS authorizations (
    nonce        TEXT PRIMARY KEY,
    task_id      TEXT NOT NULL,
    option_key   TEXT NOT NULL,
    tier         TEXT NOT NULL,
    asset        TEXT NOT NULL,
    amount       INTEGER NOT NULL,
    day          TEXT NOT NULL,
    valid_before INTEGER NOT NULL,
    payload_json TEXT NOT NULL,
    created_at   REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS authorizations_by_task ON authorizations (task_id, option_key);
CREATE INDEX IF NOT EXISTS authorizations_by_day ON authorizations (day, asset, tier);
"""
RESEND_MARGIN_S = 30
"""An authorization this close to its end is not re-sent: it could expire on the way."""


def option_key(option: dict[str, Any]) -> str:
    """The identity of a quote's option: its canonical JSON."""
    return canonical_json(option).decode()


@dataclass(frozen=True)
class Signed:
    """One authorization this node signed: the PaymentPayload it went out in."""

    nonce: str
    task_id: str
    tier: Tier
    asset: str
    amount: int
    payload: dict[str, Any]


class PayerBook:
    def __init__(self, path: Path) -> None:
        private_dir(path.parent)
        self._db = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
        self._db.execute("PRAGMA journal_mode = WAL")
        self._db.execute("PRAGMA synchronous = FULL")
        for statement in SCHEMA.split(";"):
            if statement.strip():
                self._db.execute(statement)

    @classmethod
    def of(cls, paths: DataPaths) -> PayerBook:
        return cls(paths.module_dir(MODULE_DIR) / "payer.db")

    def close(self) -> None:
        self._db.close()

    def record(self, signed: Signed, option: dict[str, Any], *, valid_before: int,
               now: float | None = None) -> None:
        """Keep ``signed`` (committed, on disk) before its message is sent."""
        now = time.time() if now is None else now
        self._db.execute(
            "INSERT INTO authorizations (nonce, task_id, option_key, tier, asset, amount, day,"
            " valid_before, payload_json, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (signed.nonce, signed.task_id, option_key(option), signed.tier.value, signed.asset,
             signed.amount, utc_day(now), valid_before, json.dumps(signed.payload), now))

    def reusable(self, task_id: str, option: dict[str, Any],
                 now: float | None = None) -> Signed | None:
        """The newest authorization for this task and option that is still valid to send."""
        now = time.time() if now is None else now
        row = self._db.execute(
            "SELECT nonce, task_id, tier, asset, amount, payload_json FROM authorizations"
            " WHERE task_id = ? AND option_key = ? AND valid_before > ?"
            " ORDER BY created_at DESC LIMIT 1",
            (task_id, option_key(option), int(now) + RESEND_MARGIN_S)).fetchone()
        if row is None:
            return None
        return Signed(nonce=row[0], task_id=row[1], tier=Tier(row[2]), asset=row[3],
                      amount=row[4], payload=json.loads(row[5]))

    def spent(self, asset: str, *, day: str | None = None) -> int:
        """What was signed below the operator on ``day`` (today, UTC), in smallest units."""
        tiers = [tier.value for tier in BELOW_THE_OPERATOR]
        row = self._db.execute(
            "SELECT COALESCE(SUM(amount), 0) FROM authorizations WHERE day = ? AND asset = ?"
            f" AND tier IN ({', '.join('?' * len(tiers))})",
            (day or utc_day(time.time()), asset, *tiers)).fetchone()
        return int(row[0])

    def signed_for(self, task_id: str) -> list[Signed]:
        rows = self._db.execute(
            "SELECT nonce, task_id, tier, asset, amount, payload_json FROM authorizations"
            " WHERE task_id = ? ORDER BY created_at", (task_id,)).fetchall()
        return [Signed(nonce=r[0], task_id=r[1], tier=Tier(r[2]), asset=r[3], amount=r[4],
                       payload=json.loads(r[5])) for r in rows]
