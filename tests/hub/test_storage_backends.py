"""The two implementations of HubStorage keep the same contract: SQLite in a temporary file and
PostgreSQL on a real server (tests.hub.servers), each test on a database of its own."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from anet_hub.sqlite import SqliteHubStorage
from anet_hub.storage import (
    AgentState,
    CardIndex,
    HubStorage,
    ReviewRecord,
    SearchFilter,
    StorageError,
)
from tests.hub.servers import PostgresServer, postgres  # noqa: F401 - the fixture

pytestmark = pytest.mark.timeout(60)

AIDS = sorted(("a" * 31 + str(n)) for n in range(2, 8))
HISTORY: list[dict[str, Any]] = [{"seq": 0, "note": "the storage keeps it as given"}]


@pytest.fixture(params=["sqlite", "postgres"])
async def storage(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[HubStorage]:
    if request.param == "sqlite":
        opened: HubStorage = await SqliteHubStorage.open(tmp_path / "hub.db")
    else:
        pytest.importorskip("asyncpg")
        from anet_hub.postgres import PostgresHubStorage

        server: PostgresServer = request.getfixturevalue("postgres")
        url = server.create_database(f"contract_{uuid.uuid4().hex[:12]}")
        opened = await PostgresHubStorage.open(url, hub_aid="h" * 32)
    try:
        yield opened
    finally:
        await opened.close()


async def register(storage: HubStorage, aid: str, *, card: dict[str, Any] | None = None,
                   state: AgentState = AgentState.REGISTERED) -> None:
    await storage.save_registration(aid, HISTORY, 0, state, 1000.0)
    if card is not None:
        await storage.save_card(aid, card, CardIndex(text=card["name"].lower(),
                                                     skills=frozenset(card["skills"]),
                                                     tags=frozenset({"t"})))


async def test_the_queue_stores_once_keeps_order_and_forgets_on_ack(storage: HubStorage) -> None:
    recipient, sender = AIDS[0], AIDS[1]
    seqs = [await storage.enqueue(id=f"e{n}", sender=sender, recipient=recipient,
                                  text=f'{{"n":{n}}}', now=100.0 + n, ttl=60.0)
            for n in range(5)]
    assert seqs == sorted(seqs) and len(set(seqs)) == 5
    again = await storage.enqueue(id="e2", sender=sender, recipient=recipient, text="{}",
                                  now=200.0, ttl=60.0)
    assert again == seqs[2]  # a retry stores nothing and names the same place
    assert await storage.count_queued() == 5
    waiting = await storage.pending(recipient, after_seq=0, limit=3, now=150.0)
    assert [item.id for item in waiting] == ["e0", "e1", "e2"]
    assert waiting[2].text == '{"n":2}' and waiting[2].stored_at == 102.0
    after = await storage.pending(recipient, after_seq=waiting[-1].seq, limit=10, now=150.0)
    assert [item.id for item in after] == ["e3", "e4"]
    assert await storage.remove(recipient, "e1") is True
    assert await storage.remove(recipient, "e1") is False
    assert await storage.pending(AIDS[2], after_seq=0, limit=10, now=150.0) == []
    assert await storage.pending(recipient, after_seq=0, limit=10, now=164.0) == []
    assert await storage.purge_expired(162.5) == 2  # e0 and e2 (e1 was acknowledged)
    assert [item.id for item in await storage.pending(recipient, after_seq=0, limit=10,
                                                      now=150.0)] == ["e3", "e4"]


async def test_registrations_approval_cards_and_search(storage: HubStorage) -> None:
    await register(storage, AIDS[3], state=AgentState.PENDING)
    assert [record.aid for record in await storage.list_pending()] == [AIDS[3]]
    # A registered agent stays registered; a pending one stays pending until approved.
    await storage.save_registration(AIDS[3], HISTORY, 1, AgentState.REGISTERED, 2000.0)
    record = await storage.get_agent(AIDS[3])
    assert record is not None and record.state is AgentState.PENDING and record.key_seq == 1
    assert record.history == HISTORY and record.last_seen == 2000.0
    assert await storage.approve(AIDS[3]) is True
    assert await storage.approve(AIDS[3]) is False
    await storage.touch(AIDS[3], 1500.0)
    assert (await storage.get_agent(AIDS[3])).last_seen == 2000.0  # never goes back

    for n, aid in enumerate(reversed(AIDS)):
        await register(storage, aid, card={"name": f"Agent_{n} 100%", "skills": [f"s{n % 2}"]})
    everyone = await storage.search(SearchFilter(), after=None, limit=50)
    assert [record.aid for record in everyone] == AIDS  # ordered by AID
    page = await storage.search(SearchFilter(), after=AIDS[1], limit=2)
    assert [record.aid for record in page] == AIDS[2:4]
    assert {record.aid for record in await storage.search(SearchFilter(skill="s0"), after=None,
                                                          limit=50)} == set(AIDS[1::2])
    words = await storage.search(SearchFilter(words=("agent_1",)), after=None, limit=50)
    assert [record.card["name"] for record in words] == ["Agent_1 100%"]
    assert await storage.search(SearchFilter(words=("agent%",)), after=None, limit=50) == []
    assert len(await storage.search(SearchFilter(words=("100%",)), after=None, limit=50)) == 6
    assert await storage.search(SearchFilter(tag="t", skill="s9"), after=None, limit=50) == []


async def test_reviews_count_once_per_receipt_and_the_official_list(storage: HubStorage) -> None:
    await register(storage, AIDS[0])
    review = ReviewRecord(receipt_key="r1", subject=AIDS[0], reviewer=AIDS[1], rating=4,
                          review={"rating": 4}, created=1.0)
    results = await asyncio.gather(*(storage.add_review(review) for _ in range(4)))
    assert sorted(results) == [False, False, False, True]
    record = await storage.get_agent(AIDS[0])
    assert (record.review_count, record.avg_rating) == (1, 4.0)
    assert await storage.get_official_list() is None
    await storage.put_official_list({"version": 1, "members": [AIDS[0]]})
    await storage.put_official_list({"version": 2, "members": []})
    assert await storage.get_official_list() == {"version": 2, "members": []}


async def test_postgres_refuses_another_hubs_database_and_shares_rate_limits(
        postgres: PostgresServer) -> None:  # noqa: F811 - the fixture
    pytest.importorskip("asyncpg")
    from anet_hub.postgres import PostgresHubStorage

    url = postgres.create_database(f"owner_{uuid.uuid4().hex[:12]}")
    first = await PostgresHubStorage.open(url, hub_aid="h" * 32)
    second = await PostgresHubStorage.open(url, hub_aid="h" * 32)
    try:
        with pytest.raises(StorageError) as refused:
            await PostgresHubStorage.open(url, hub_aid="k" * 32)
        assert refused.value.reason == "hub-storage-other-hub"
        assert "h" * 32 in refused.value.message and "identity/" in refused.value.message
        # One bucket per AID whichever instance charges it: a burst of 5 is 5 in all.
        waits = [await instance.take_token(AIDS[0], 0.01, 5)
                 for instance in (first, second) * 4]
        assert waits[:5] == [0.0] * 5 and all(wait > 1 for wait in waits[5:])
        assert await first.take_token(AIDS[1], 0.01, 5) == 0.0
        assert await second.forget_full_buckets(0.01, 5) == 0
        assert await second.forget_full_buckets(1e9, 5) == 2
    finally:
        await first.close()
        await second.close()


async def test_postgres_unreachable_is_a_clear_storage_error() -> None:
    pytest.importorskip("asyncpg")
    from anet_hub.postgres import PostgresHubStorage
    from tests.support.processes import free_port

    url = f"postgresql://anet:secret@127.0.0.1:{free_port()}/hub"
    with pytest.raises(StorageError) as refused:
        await PostgresHubStorage.open(url)
    assert refused.value.reason == "hub-storage-unreachable"
    assert "secret" not in refused.value.message and "anet:***@127.0.0.1" in refused.value.message


def test_the_deployment_is_checked_and_remembered(tmp_path: Path) -> None:
    from anet_core.api import AnetError
    from anet_hub.deployment import Deployment, open_existing

    with pytest.raises(ValueError, match="give --postgres too"):
        Deployment(nats="nats://127.0.0.1:4222")
    with pytest.raises(ValueError, match="PGPASSWORD"):
        Deployment(postgres="postgresql://anet:secret@db:5432/hub")
    with pytest.raises(ValueError, match="PGPASSFILE") as in_query:
        Deployment(postgres="postgresql://anet@db/hub?sslmode=require&password=secret")
    with pytest.raises(ValueError, match="expected postgres://") as scheme:
        Deployment(postgres="mysql://anet@db/hub?password=secret")
    assert "secret" not in str(in_query.value) + str(scheme.value)
    for nats in ("nats://a:secret@n:4222", "nats://secret@n:4222"):
        with pytest.raises(ValueError, match="NATS_USER and NATS_PASSWORD, NATS_TOKEN") as url:
            Deployment(postgres="postgresql://anet@db/hub", nats=nats)
        assert "secret" not in str(url.value)
    cluster = Deployment(postgres="postgresql://anet@db/hub", nats="nats://n1:4222,nats://n2:4222")
    cluster.write(tmp_path)
    assert Deployment.read(tmp_path) == cluster
    Deployment().write(tmp_path)
    assert Deployment.read(tmp_path) == Deployment() and not (tmp_path / "cluster.json").exists()
    with pytest.raises(AnetError) as missing:
        asyncio.run(open_existing(tmp_path / "nothing"))
    assert missing.value.reason == "hub-no-data"
