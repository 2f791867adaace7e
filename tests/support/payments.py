"""Payments at a hub rail, for tests: the ledger's totals (conservation), quotes and payloads.

``assert_ledger_conserved(hub_data_dir)`` after every paid test: the credits the operator gave
equal the balances, and the balances replayed from the entries equal the stored ones (no amount
moved twice, none lost). It reads the hub's storage (hub.db, or the PostgreSQL of its
cluster.json), with the hub running or not. The synchronous forms read on a thread of their
own; a test whose hub runs in its own event loop awaits the ``…_async`` forms instead, which
never block that loop (a PostgreSQL hub would otherwise wait for itself). Needs the hub module.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from x402.schemas import PaymentPayload, PaymentPayloadV1, PaymentRequirements, ResourceInfo

from anet_core.identity import Identity
from anet_core.protocol.amounts import rail_network
from anet_core.protocol.payments import sign_authorization
from anet_hub.deployment import SQLITE_FILE, Deployment, open_existing
from anet_hub.ledger import EntryKind, LedgerEntry
from anet_hub.storage import HubStorage

READ_TIMEOUT_S = 30.0


@dataclass(frozen=True)
class LedgerTotals:
    credits: dict[str, int]
    """Per asset: the sum of the operator's credits."""
    balances: dict[str, int]
    """Per asset: the sum of the stored balances."""
    stored: dict[tuple[str, str], int]
    """Per (AID, asset): the stored balance (zeros left out)."""
    replayed: dict[tuple[str, str], int]
    """Per (AID, asset): the balance the entries add up to (zeros left out)."""
    entries: list[LedgerEntry]

    @property
    def transfers(self) -> list[LedgerEntry]:
        return [entry for entry in self.entries if entry.kind is EntryKind.TRANSFER]

    def balance(self, aid: str, asset: str = "USD") -> int:
        return self.stored.get((aid, asset), 0)


async def ledger_totals_of(storage: HubStorage) -> LedgerTotals:
    """The totals of an open storage's ledger (for tests that hold the storage itself)."""
    entries: list[LedgerEntry] = []
    while page := await storage.ledger.entries(after_seq=entries[-1].seq if entries else 0):
        entries += page
    balances = await storage.ledger.balances()
    credits: Counter[str] = Counter()
    replayed: Counter[tuple[str, str]] = Counter()
    for entry in entries:
        if entry.kind is EntryKind.CREDIT:
            credits[entry.asset] += entry.amount
        else:
            assert entry.payer is not None
            replayed[(entry.payer, entry.asset)] -= entry.amount
        replayed[(entry.payee, entry.asset)] += entry.amount
    sums: Counter[str] = Counter()
    for item in balances:
        sums[item.asset] += item.amount
    return LedgerTotals(
        credits=dict(credits), balances={asset: total for asset, total in sums.items() if total},
        stored={(item.aid, item.asset): item.amount for item in balances if item.amount},
        replayed={key: amount for key, amount in replayed.items() if amount}, entries=entries)


async def ledger_totals_async(hub_data_dir: Path) -> LedgerTotals:
    """The ledger of the hub served from ``hub_data_dir`` (empty when it never started)."""
    if not Deployment.read(hub_data_dir).clustered \
            and not (hub_data_dir / SQLITE_FILE).exists():
        return LedgerTotals({}, {}, {}, {}, [])
    async with asyncio.timeout(READ_TIMEOUT_S):
        storage = await open_existing(hub_data_dir)
        try:
            return await ledger_totals_of(storage)
        finally:
            await storage.close()


def ledger_totals(hub_data_dir: Path) -> LedgerTotals:
    """:func:`ledger_totals_async` from synchronous code (a hub in another process)."""
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(asyncio.run, ledger_totals_async(hub_data_dir)).result()


def assert_ledger_conserved(hub_data_dir: Path) -> LedgerTotals:
    """Fail unless every asset's balances add up to its credits and every balance is what the
    entries make it; returns the totals for further checks."""
    return assert_conserved(ledger_totals(hub_data_dir))


async def assert_ledger_conserved_async(hub_data_dir: Path) -> LedgerTotals:
    return assert_conserved(await ledger_totals_async(hub_data_dir))


def assert_conserved(totals: LedgerTotals) -> LedgerTotals:
    assert totals.balances == {asset: total for asset, total in totals.credits.items() if total}, \
        f"the balances {totals.balances} differ from the credits {totals.credits}"
    assert totals.stored == totals.replayed, \
        f"the stored balances {totals.stored} differ from the entries' {totals.replayed}"
    assert all(amount > 0 for amount in totals.stored.values()), totals.stored
    return totals


def quote(*, hub_aid: str, payee: str, task: str, amount: int, asset: str = "USD",
          hub_url: str = "http://127.0.0.1:1") -> PaymentRequirements:
    """The requirements a provider quotes for a payment at the rail of ``hub_aid``."""
    return PaymentRequirements(scheme="exact", network=rail_network(hub_aid), asset=asset,
                               amount=str(amount), pay_to=payee, max_timeout_seconds=600,
                               extra={"task": task, "hubUrl": hub_url})


def pay(payer: Identity, requirements: PaymentRequirements, *, version: int = 2,
        **changes: Any) -> dict[str, Any]:
    """A facilitator request body: ``payer``'s authorization for exactly ``requirements``
    (``changes`` override the authorization's arguments, to make it wrong on purpose)."""
    arguments: dict[str, Any] = {
        "payee": requirements.pay_to, "network": requirements.network,
        "asset": requirements.asset, "amount": int(requirements.amount),
        "task": requirements.extra["task"], "valid_for_s": requirements.max_timeout_seconds}
    authorization = sign_authorization(payer, **(arguments | changes))
    return body(authorization, requirements, version=version)


def body(authorization: dict[str, Any], requirements: PaymentRequirements, *,
         version: int = 2) -> dict[str, Any]:
    """``{x402Version, paymentPayload, paymentRequirements}`` around a signed authorization."""
    resource = ResourceInfo(url=f"anet:{requirements.pay_to}#skill")
    if version == 1:
        payload: PaymentPayload | PaymentPayloadV1 = PaymentPayloadV1(
            x402_version=1, scheme=requirements.scheme, network=requirements.network,
            payload={"authorization": authorization})
        quoted: dict[str, Any] = {
            "scheme": requirements.scheme, "network": requirements.network,
            "maxAmountRequired": requirements.amount, "resource": resource.url,
            "payTo": requirements.pay_to, "maxTimeoutSeconds": requirements.max_timeout_seconds,
            "asset": requirements.asset, "extra": requirements.extra}
    else:
        payload = PaymentPayload(accepted=requirements, resource=resource,
                                 payload={"authorization": authorization})
        quoted = requirements.model_dump(by_alias=True, exclude_none=True)
    return {"x402Version": version,
            "paymentPayload": payload.model_dump(by_alias=True, exclude_none=True),
            "paymentRequirements": quoted}
