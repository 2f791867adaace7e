"""The ledger's contract on both storages: SQLite in a temporary file and PostgreSQL on a real
server (tests.hub.servers), each test with two storage objects on one database, as two hub
instances (or a hub and `anet hub credit`) have."""

from __future__ import annotations

import asyncio
import secrets
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from anet_hub.ledger import (
    MAX_BALANCE,
    AlreadySettled,
    BalanceLimit,
    EntryKind,
    Insufficient,
    PayeeFull,
    Settled,
    Transfer,
    Voided,
)
from anet_hub.sqlite import SqliteHubStorage
from anet_hub.storage import HubStorage
from tests.hub.servers import PostgresServer, postgres  # noqa: F401 - the fixture
from tests.support.payments import assert_conserved, ledger_totals_of

pytestmark = pytest.mark.timeout(60)

ALICE, BOB, CAROL = ("a" * 32, "b" * 32, "c" * 32)


@pytest.fixture(params=["sqlite", "postgres"])
async def pair(request: pytest.FixtureRequest,
               tmp_path: Path) -> AsyncIterator[tuple[HubStorage, HubStorage]]:
    opened: list[HubStorage] = []
    if request.param == "sqlite":
        for _ in range(2):
            opened.append(await SqliteHubStorage.open(tmp_path / "hub.db"))
    else:
        pytest.importorskip("asyncpg")
        from anet_hub.postgres import PostgresHubStorage

        server: PostgresServer = request.getfixturevalue("postgres")
        url = server.create_database(f"ledger_{uuid.uuid4().hex[:12]}")
        for _ in range(2):
            opened.append(await PostgresHubStorage.open(url, hub_aid="h" * 32))
    try:
        yield opened[0], opened[1]
        assert_conserved(await ledger_totals_of(opened[0]))
    finally:
        for storage in opened:
            await storage.close()


def transfer(payer: str, payee: str, amount: int, *, nonce: str | None = None,
             asset: str = "USD") -> Transfer:
    """A transfer as the rail asks for it; each call is another instance's own settlement."""
    nonce = nonce or secrets.token_hex(32)
    transaction = f"anet-tx-{secrets.token_hex(16)}"
    return Transfer(payer=payer, payee=payee, asset=asset, amount=amount, nonce=nonce,
                    task=f"task-{nonce[:6]}", transaction=transaction,
                    authorization={"nonce": nonce}, settlement={"transaction": transaction},
                    created=1000.0)


async def credit(storage: HubStorage, aid: str, amount: int, asset: str = "USD") -> None:
    await storage.ledger.credit(aid, asset, amount, transaction=f"c-{secrets.token_hex(8)}",
                                now=999.0)


async def test_credit_and_settle_move_exactly_the_amount(
        pair: tuple[HubStorage, HubStorage]) -> None:
    storage, _ = pair
    await credit(storage, ALICE, 100)
    await credit(storage, ALICE, 50)
    await credit(storage, ALICE, 7, "EUR")
    assert await storage.ledger.balance(ALICE, "USD") == 150
    paid = transfer(ALICE, BOB, 30)
    outcome = await storage.ledger.settle(paid)
    assert isinstance(outcome, Settled)
    entry = outcome.entry
    assert (entry.kind, entry.payer, entry.payee, entry.amount, entry.nonce, entry.settlement) == (
        EntryKind.TRANSFER, ALICE, BOB, 30, paid.nonce, paid.settlement)
    assert [(item.aid, item.asset, item.amount) for item in await storage.ledger.balances()] == [
        (ALICE, "EUR", 7), (ALICE, "USD", 120), (BOB, "USD", 30)]
    assert [(item.asset, item.amount) for item in await storage.ledger.balances(BOB)] == [
        ("USD", 30)]
    assert (await storage.ledger.decision(ALICE, paid.nonce)) == AlreadySettled(entry)
    assert await storage.ledger.decision(BOB, paid.nonce) is None
    kinds = [item.kind for item in await storage.ledger.entries()]
    assert kinds == [EntryKind.CREDIT] * 3 + [EntryKind.TRANSFER]
    assert [item.seq for item in await storage.ledger.entries(after_seq=entry.seq - 1)] == [
        entry.seq]


async def test_a_nonce_settles_once_and_a_refusal_writes_nothing(
        pair: tuple[HubStorage, HubStorage]) -> None:
    storage, other = pair
    await credit(storage, ALICE, 100)
    first = await storage.ledger.settle(transfer(ALICE, BOB, 40, nonce="1" * 64))
    again = await other.ledger.settle(transfer(ALICE, BOB, 40, nonce="1" * 64))
    assert isinstance(first, Settled) and again == AlreadySettled(first.entry)
    # The same nonce of another payer is another authorization.
    await credit(storage, CAROL, 5)
    assert isinstance(await other.ledger.settle(transfer(CAROL, BOB, 5, nonce="1" * 64)),
                      Settled)
    assert await storage.ledger.settle(transfer(ALICE, BOB, 61)) == Insufficient(60)
    assert await storage.ledger.settle(transfer(BOB, ALICE, 1, asset="EUR")) == Insufficient(0)
    assert await storage.ledger.balance(ALICE, "USD") == 60
    assert len(await storage.ledger.entries()) == 4  # two credits, two transfers
    # A payer paying itself moves nothing and still settles once.
    assert isinstance(await storage.ledger.settle(transfer(ALICE, ALICE, 60)), Settled)
    assert await storage.ledger.balance(ALICE, "USD") == 60


async def test_a_balance_has_a_ceiling(pair: tuple[HubStorage, HubStorage]) -> None:
    storage, _ = pair
    await credit(storage, ALICE, MAX_BALANCE)
    with pytest.raises(BalanceLimit) as full:
        await credit(storage, ALICE, 1)
    assert full.value.balance == MAX_BALANCE
    await credit(storage, BOB, 1)
    assert await storage.ledger.settle(transfer(BOB, ALICE, 1)) == PayeeFull(MAX_BALANCE)
    assert await storage.ledger.balance(BOB, "USD") == 1


async def test_concurrent_settlements_of_one_nonce_on_two_instances_move_once(
        pair: tuple[HubStorage, HubStorage]) -> None:
    first, second = pair
    await credit(first, ALICE, 1000)
    nonce = secrets.token_hex(32)
    outcomes = await asyncio.gather(*(
        storage.ledger.settle(transfer(ALICE, BOB, 100, nonce=nonce))
        for storage in (first, second) * 4))
    settled = [outcome for outcome in outcomes if isinstance(outcome, Settled)]
    assert len(settled) == 1, outcomes
    assert all(outcome == AlreadySettled(settled[0].entry) for outcome in outcomes
               if not isinstance(outcome, Settled))
    assert (await first.ledger.balance(ALICE, "USD"), await second.ledger.balance(BOB, "USD")) \
        == (900, 100)


async def test_an_authorization_is_either_settled_or_void(
        pair: tuple[HubStorage, HubStorage]) -> None:
    storage, other = pair
    await credit(storage, ALICE, 100)
    voided = await storage.ledger.void(ALICE, "2" * 64, task="t-void", now=1001.0)
    assert voided == Voided(at=1001.0, task="t-void")
    assert await other.ledger.void(ALICE, "2" * 64, task="t-void", now=1002.0) == voided
    assert await other.ledger.settle(transfer(ALICE, BOB, 40, nonce="2" * 64)) == voided
    assert await other.ledger.decision(ALICE, "2" * 64) == voided
    assert await storage.ledger.decision(CAROL, "2" * 64) is None  # another payer's nonce
    settled = await storage.ledger.settle(transfer(ALICE, BOB, 40, nonce="3" * 64))
    assert isinstance(settled, Settled)
    assert await other.ledger.void(ALICE, "3" * 64, task="t-late", now=1003.0) == \
        AlreadySettled(settled.entry)
    assert await storage.ledger.decision(ALICE, "3" * 64) == AlreadySettled(settled.entry)
    assert (await storage.ledger.balance(ALICE, "USD"), await storage.ledger.balance(BOB, "USD")) \
        == (60, 40)


async def test_a_void_racing_settlements_on_two_instances_decides_once(
        pair: tuple[HubStorage, HubStorage]) -> None:
    """The payer's void and the payee's settlements of one nonce, all at once on two
    instances, many times over: each nonce ends settled once (every void answers that
    transfer) or void (every settlement answers the void), never both."""
    first, second = pair
    await credit(first, ALICE, 1000)
    outcomes_seen = set()
    for _ in range(12):
        nonce = secrets.token_hex(32)
        calls = [first.ledger.void(ALICE, nonce, task="t", now=1000.0),
                 second.ledger.settle(transfer(ALICE, BOB, 10, nonce=nonce)),
                 first.ledger.settle(transfer(ALICE, BOB, 10, nonce=nonce)),
                 second.ledger.void(ALICE, nonce, task="t", now=1000.0)]
        outcomes = await asyncio.gather(*calls)
        settled = [outcome for outcome in outcomes if isinstance(outcome, Settled)]
        if settled:
            assert len(settled) == 1, outcomes
            assert all(outcome == AlreadySettled(settled[0].entry) for outcome in outcomes
                       if outcome is not settled[0]), outcomes
            assert await first.ledger.decision(ALICE, nonce) == AlreadySettled(settled[0].entry)
            outcomes_seen.add("settled")
        else:
            assert all(isinstance(outcome, Voided) for outcome in outcomes), outcomes
            assert isinstance(await second.ledger.decision(ALICE, nonce), Voided)
            outcomes_seen.add("voided")
    transfers = [entry for entry in await first.ledger.entries()
                 if entry.kind is EntryKind.TRANSFER]
    assert await first.ledger.balance(BOB, "USD") == 10 * len(transfers)
    assert outcomes_seen  # which wins is the race's; that one does is the point


async def test_crossing_transfers_on_two_instances_all_settle(
        pair: tuple[HubStorage, HubStorage]) -> None:
    first, second = pair
    await credit(first, ALICE, 500)
    await credit(second, BOB, 500)
    moves = [transfer(ALICE, BOB, 3) if n % 2 else transfer(BOB, ALICE, 2) for n in range(40)]
    outcomes = await asyncio.gather(*(
        (first if n % 3 else second).ledger.settle(move) for n, move in enumerate(moves)))
    assert all(isinstance(outcome, Settled) for outcome in outcomes), outcomes
    assert (await first.ledger.balance(ALICE, "USD"), await first.ledger.balance(BOB, "USD")) \
        == (500 - 20 * 3 + 20 * 2, 500 + 20 * 3 - 20 * 2)


async def test_an_agents_entries_are_its_credits_and_the_transfers_it_paid_or_was_paid(
        pair: tuple[HubStorage, HubStorage]) -> None:
    storage, other = pair
    await credit(storage, ALICE, 100)
    await credit(storage, CAROL, 100)
    paid = await storage.ledger.settle(transfer(ALICE, BOB, 10))
    received = await other.ledger.settle(transfer(CAROL, ALICE, 5))
    await other.ledger.settle(transfer(CAROL, BOB, 7))
    assert isinstance(paid, Settled) and isinstance(received, Settled)
    alices = await other.ledger.entries(aid=ALICE)
    assert [(entry.kind, entry.payer, entry.payee) for entry in alices] == [
        (EntryKind.CREDIT, None, ALICE), (EntryKind.TRANSFER, ALICE, BOB),
        (EntryKind.TRANSFER, CAROL, ALICE)]
    assert await storage.ledger.entries(aid=ALICE, after_seq=alices[0].seq, limit=1) == [
        paid.entry]
    assert [entry.amount for entry in await storage.ledger.entries(aid=BOB)] == [10, 7]
