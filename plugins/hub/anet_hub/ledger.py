"""The hub's ledger: credit per AID and asset, moved only by the operator and by settlements.

The ledger is append-only: an entry is either a **credit** (the operator, ``anet hub credit``,
adds to an AID's balance) or a **transfer** (a settlement moved an amount from the payer to the
payee, with the authorization the payer signed and the settlement the hub signed). The balances
are kept in the same transaction as the entry that changes them, so the sum of every balance of
an asset always equals the sum of its credits. A transfer's ``(payer, nonce)`` is unique in the
storage itself: a replayed authorization moves nothing, even with several hub instances on one
PostgreSQL (docs/payments.md, "The hub as a payment rail").

An authorization is decided once: settled (a transfer) or **void** (its payer withdrew it, as
its task was canceled). Both are written under the same ``(payer, nonce)``, and the storage
lets one of them in: a void finds a transfer made before it and loses; a settlement finds a
void and moves nothing (docs/payments.md, "Cancel and settlement").

Amounts are integers in the asset's smallest unit (``anet_core.protocol.payments``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Protocol

from anet_core.protocol.amounts import format_amount

LEDGER_PAGE = 500
"""The most entries one ``/x402/ledger`` answer gives; its ``next`` asks for the rest."""
MAX_BALANCE = 10**15
"""The most one balance may hold, in the asset's smallest unit (10 trillion USD): far inside the
64-bit integers both storages count in."""


class EntryKind(StrEnum):
    CREDIT = "credit"
    TRANSFER = "transfer"


@dataclass(frozen=True)
class LedgerEntry:
    """One line of the ledger. A credit has no ``payer``, ``nonce``, ``task`` or documents."""

    seq: int
    kind: EntryKind
    payer: str | None
    payee: str
    asset: str
    amount: int
    transaction: str
    created: float
    nonce: str | None = None
    task: str | None = None
    authorization: dict[str, Any] | None = None
    settlement: dict[str, Any] | None = None

    def as_dict(self) -> dict[str, Any]:
        """The entry as ``anet hub ledger --json`` shows it (amount as a decimal string)."""
        shown: dict[str, Any] = {
            "seq": self.seq, "kind": self.kind.value, "payer": self.payer, "payee": self.payee,
            "asset": self.asset, "amount": format_amount(self.amount, self.asset),
            "transaction": self.transaction, "created": self.created, "task": self.task,
            "nonce": self.nonce, "authorization": self.authorization,
            "settlement": self.settlement}
        return {key: value for key, value in shown.items() if value is not None}


@dataclass(frozen=True)
class Transfer:
    """What a settlement asks the ledger to do, with the settlement already signed."""

    payer: str
    payee: str
    asset: str
    amount: int
    nonce: str
    task: str
    transaction: str
    authorization: dict[str, Any]
    settlement: dict[str, Any]
    created: float


@dataclass(frozen=True)
class Settled:
    """The transfer was written: the money moved now."""

    entry: LedgerEntry


@dataclass(frozen=True)
class AlreadySettled:
    """``(payer, nonce)`` was settled before: nothing moved now; ``entry`` is the original."""

    entry: LedgerEntry


@dataclass(frozen=True)
class Voided:
    """``(payer, nonce)`` is void (since ``at``, withdrawn for ``task``): nothing moves for it,
    ever."""

    at: float
    task: str


@dataclass(frozen=True)
class Insufficient:
    """The payer's balance is below the amount: nothing moved."""

    balance: int


@dataclass(frozen=True)
class PayeeFull:
    """The payee's balance would exceed :data:`MAX_BALANCE`: nothing moved."""

    balance: int


SettleOutcome = Settled | AlreadySettled | Voided | Insufficient | PayeeFull
Decision = AlreadySettled | Voided
"""An authorization is decided once: settled (the transfer) or void. What a void answers."""


@dataclass(frozen=True)
class Balance:
    aid: str
    asset: str
    amount: int


class Ledger(Protocol):
    """The ledger in a hub's storage (``storage.ledger``); every method is one transaction."""

    async def credit(self, aid: str, asset: str, amount: int, *, transaction: str,
                     now: float) -> LedgerEntry:
        """Add ``amount`` to the balance of ``aid``; raises :class:`BalanceLimit` when the
        balance would exceed :data:`MAX_BALANCE`."""

    async def settle(self, transfer: Transfer) -> SettleOutcome:
        """Move the amount once: the entry, the debit and the credit in one transaction;
        nothing for a nonce that is void."""

    async def void(self, payer: str, nonce: str, *, task: str, now: float) -> Decision:
        """Make ``(payer, nonce)`` void, unless it was settled: then that transfer. Voiding
        again answers the first void."""

    async def decision(self, payer: str, nonce: str) -> Decision | None:
        """What the ledger decided for ``(payer, nonce)``: its transfer, its void, or nothing
        yet."""

    async def balance(self, aid: str, asset: str) -> int: ...

    async def balances(self, aid: str | None = None) -> list[Balance]:
        """Every balance (of ``aid`` only, when given), ordered by AID and asset."""

    async def entries(self, *, after_seq: int = 0, limit: int = 1000,
                      aid: str | None = None) -> list[LedgerEntry]:
        """Entries in the order they were written, ``seq`` above ``after_seq``; of ``aid`` only
        (its credits, and the transfers it paid or was paid), when given."""


class BalanceLimit(ValueError):
    """A credit that would push a balance above :data:`MAX_BALANCE`."""

    def __init__(self, balance: int) -> None:
        super().__init__(f"the balance would exceed {MAX_BALANCE}")
        self.balance = balance


ENTRY_COLUMNS = ("seq, kind, payer, payee, asset, amount, transaction_id, created, nonce, task, "
                 "authorization_doc, settlement_doc")
"""The columns of an entry row, in the order :func:`entry_from_row` reads them."""


def entry_from_row(row: Any) -> LedgerEntry:
    return LedgerEntry(seq=int(row[0]), kind=EntryKind(row[1]), payer=row[2], payee=row[3],
                       asset=row[4], amount=int(row[5]), transaction=row[6], created=row[7],
                       nonce=row[8], task=row[9],
                       authorization=json.loads(row[10]) if row[10] else None,
                       settlement=json.loads(row[11]) if row[11] else None)
