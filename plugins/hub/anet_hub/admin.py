"""What the hub operator does from a shell, on the hub's data directory, while the hub runs or not.

Each function opens the hub's storage for one change (``hub.db``, or the PostgreSQL named in
``cluster.json``: anet_hub.deployment). A running hub sees the change at once:
pending sessions poll for their approval, the official list is read from storage on every
directory answer, and the rail reads balances from the ledger on every payment.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from anet_core.api import AnetError, Identity, check_aid
from anet_core.protocol.amounts import PaymentError, format_amount, parse_amount
from anet_hub.deployment import open_existing
from anet_hub.ledger import MAX_BALANCE, Balance, BalanceLimit, LedgerEntry
from anet_hub.storage import AgentRecord, HubStorage, StorageError

T = TypeVar("T")


@dataclass(frozen=True)
class PendingAgent:
    aid: str
    first_seen: float
    name: str | None


NODE_AID_HINT = "copy it from `anet hub pending` or from the node's `anet status`"


async def _with_storage(data_dir: Path, action: Callable[[HubStorage], Awaitable[T]]) -> T:
    storage = await open_existing(data_dir)
    try:
        return await action(storage)
    except StorageError as error:
        raise AnetError(error.reason, error.message,
                        hint=f"check the disk or the database that holds {data_dir}'s hub") \
            from None
    finally:
        await storage.close()


def approve(data_dir: Path, aid: str) -> None:
    """Let a pending node in; its waiting session is registered within a second."""
    check_aid(aid, hint=NODE_AID_HINT)

    async def run(storage: HubStorage) -> None:
        if await storage.approve(aid):
            return
        record = await storage.get_agent(aid)
        if record is None:
            raise AnetError("hub-unknown-aid", f"{aid} never tried to register at this hub",
                            hint="`anet hub pending` lists the nodes waiting for approval")
        raise AnetError("hub-already-approved", f"{aid} is already registered")

    asyncio.run(_with_storage(data_dir, run))


def pending(data_dir: Path) -> list[PendingAgent]:
    def describe(record: AgentRecord) -> PendingAgent:
        name = record.card.get("name") if record.card else None
        return PendingAgent(record.aid, record.first_seen, name if isinstance(name, str) else None)

    async def run(storage: HubStorage) -> list[PendingAgent]:
        return [describe(record) for record in await storage.list_pending()]

    return asyncio.run(_with_storage(data_dir, run))


def change_official(data_dir: Path, aid: str, *, add: bool) -> list[str]:
    """Add or remove ``aid``; re-sign the list with the operator key. Returns the new members."""
    from anet_core.protocol.documents import sign_official_list  # pydantic: only to sign

    check_aid(aid, hint=NODE_AID_HINT)
    operator = Identity.load(data_dir / "identity")

    async def run(storage: HubStorage) -> list[str]:
        current = await storage.get_official_list()
        members = set(current["members"]) if current else set()
        if add:
            members.add(aid)
        elif aid not in members:
            raise AnetError("hub-not-official", f"{aid} is not on the official list")
        else:
            members.discard(aid)
        version = (current["version"] + 1) if current else 1
        await storage.put_official_list(sign_official_list(operator, sorted(members),
                                                           version=version))
        return sorted(members)

    return asyncio.run(_with_storage(data_dir, run))


def official(data_dir: Path) -> list[str]:
    async def run(storage: HubStorage) -> list[str]:
        current = await storage.get_official_list()
        return list(current["members"]) if current else []

    return asyncio.run(_with_storage(data_dir, run))


# -- the ledger -------------------------------------------------------------------------------


@dataclass(frozen=True)
class Credited:
    entry: LedgerEntry
    balance: int


@dataclass(frozen=True)
class LedgerListing:
    entries: list[LedgerEntry]
    balances: list[Balance]


LEDGER_PAGE = 1000


def credit(data_dir: Path, aid: str, amount: str, asset: str) -> Credited:
    """Add ``amount`` (a decimal string such as ``"5.00"``) of ``asset`` to the credit of
    ``aid``, an agent this hub knows, as one ledger entry."""
    check_aid(aid, hint=NODE_AID_HINT)
    try:
        atomic = parse_amount(amount, asset)
    except PaymentError as error:
        raise AnetError(f"hub-credit-{error.reason}", error.message,
                        hint='give a positive amount such as "5.00" and an asset the rail '
                             "keeps (--asset USD, EUR or USDC)") from None

    async def run(storage: HubStorage) -> Credited:
        if await storage.get_agent(aid) is None:
            raise AnetError("hub-unknown-aid", f"{aid} never registered at this hub; credit "
                                               "is kept for agents of this hub",
                            hint="the node joins first (`anet join <this hub's URL>`); "
                                 "`anet hub pending` and the directory list the known ones")
        try:
            entry = await storage.ledger.credit(aid, asset, atomic,
                                                transaction=f"anet-credit-{secrets.token_hex(16)}",
                                                now=time.time())
        except BalanceLimit as full:
            raise AnetError("hub-credit-too-large",
                            f"{aid} holds {format_amount(full.balance, asset)} {asset}; with "
                            f"{amount} more it would exceed the most a balance may hold "
                            f"({format_amount(MAX_BALANCE, asset)} {asset})") from None
        return Credited(entry, await storage.ledger.balance(aid, asset))

    return asyncio.run(_with_storage(data_dir, run))


def ledger(data_dir: Path) -> LedgerListing:
    """Every entry in the order it was written, and every balance."""

    async def run(storage: HubStorage) -> LedgerListing:
        entries: list[LedgerEntry] = []
        while page := await storage.ledger.entries(after_seq=entries[-1].seq if entries else 0,
                                                   limit=LEDGER_PAGE):
            entries += page
        return LedgerListing(entries, await storage.ledger.balances())

    return asyncio.run(_with_storage(data_dir, run))
