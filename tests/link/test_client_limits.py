"""The hub client under the hub's rate limit: paced and retried requests, the peer cache, and
envelopes retried on the same connection when the receiver fails.

Loopback hubs with tiny limits; no assertion on elapsed time (deadlines only stop hangs).
"""

from __future__ import annotations

import asyncio
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

from anet_core.identity import Identity, verify_history
from anet_core.link import AckTiming, HubError, KeyState, PeerInfo, SearchQuery, Verification
from anet_core.link import connection as connection_module
from anet_core.link import delivery as delivery_module
from anet_core.link.connection import RequestPacer
from anet_core.link.delivery import DeliveryQueue
from anet_core.link.directory import PeerCache, PeerVerifier
from anet_core.protocol.envelope import open_envelope, seal
from anet_core.protocol.frames import Refusal
from anet_core.util.backoff import Backoff
from tests.support.waiting import eventually

STEP_TIMEOUT_S = 20.0


def envelope_for(nodes, sender: str, recipient: str, body: dict) -> dict:
    to = nodes.identity(recipient)
    return seal(nodes.identity(sender), to.aid, to.encryption_public_key, body)


@dataclass
class HubCounters:
    """What the hub saw: lookups per AID, acks per envelope id, rate-limit refusals."""

    lookups: Counter[str] = field(default_factory=Counter)
    acks: Counter[str] = field(default_factory=Counter)
    refused: Counter[str] = field(default_factory=Counter)


def count_at_hub(hub, monkeypatch: pytest.MonkeyPatch) -> HubCounters:
    counters = HubCounters()
    directory, relay = hub.state.directory, hub.state.relay
    lookup, ack, admit = directory.lookup, relay.ack, relay.admit_request

    async def counted_lookup(aid: str):
        counters.lookups[aid] += 1
        return await lookup(aid)

    async def counted_ack(conn, envelope_id: str) -> None:
        counters.acks[envelope_id] += 1
        await ack(conn, envelope_id)

    async def counted_admit(aid: str) -> None:
        try:
            await admit(aid)
        except Refusal:
            counters.refused[aid] += 1
            raise

    monkeypatch.setattr(directory, "lookup", counted_lookup)
    monkeypatch.setattr(relay, "ack", counted_ack)
    monkeypatch.setattr(relay, "admit_request", counted_admit)
    return counters


def drain_bucket(hub, aid: str, *, debt: float = 3.0) -> None:
    """Spend every token the hub holds for ``aid`` and ``debt`` more (behind the client's back,
    and not counted by ``count_at_hub``), so the hub's next token is ``(1 + debt) / rate``
    seconds away and the client's next request is surely refused there."""
    relay = hub.state.relay
    for _ in range(10_000):
        if relay._take_local_token(aid):
            bucket = relay._buckets[aid]
            bucket.tokens, bucket.stamp = -debt, time.monotonic()
            return
    raise AssertionError("the bucket never ran dry")


class OpeningReceiver:
    """Does what the task layer's receiver does with each envelope: look the sender up, open
    it; optionally fails for some envelopes first."""

    def __init__(self, client, identity: Identity) -> None:
        self.client = client
        self.identity = identity
        self.opened: list[tuple[str, dict[str, Any]]] = []
        self.calls: Counter[str] = Counter()
        self.fail: dict[str, int] = {}
        self.fail_from: set[str] = set()
        self.changed = asyncio.Event()

    async def __call__(self, envelope: dict[str, Any]) -> None:
        self.calls[envelope["id"]] += 1
        if self.fail.get(envelope["id"], 0) > 0:
            self.fail[envelope["id"]] -= 1
            raise RuntimeError("receiver failed on purpose")
        if envelope["from"] in self.fail_from:
            raise RuntimeError("receiver fails for this sender")
        peer = await self.client.peer(envelope["from"])
        opened = open_envelope(envelope, self.identity, peer.history)
        self.opened.append((opened.sender, opened.body))
        self.changed.set()

    async def wait_for(self, count: int) -> list[tuple[str, dict[str, Any]]]:
        async with asyncio.timeout(STEP_TIMEOUT_S):
            while len(self.opened) < count:
                self.changed.clear()
                await self.changed.wait()
        return self.opened


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """Receiver retries after 0.05 s doubling (0.5 s in production): same logic, faster test."""
    monkeypatch.setattr(delivery_module, "RECEIVE_RETRY", Backoff(first_s=0.05, cap_s=3.0))


async def connect_receiver(nodes, hub, name: str):
    client = await nodes.connect(name, hub)
    receiver = OpeningReceiver(client, nodes.identity(name))
    client.set_receiver(receiver)
    return client, receiver


async def test_a_burst_from_one_sender_arrives_without_reconnect_and_one_lookup(
        hub_factory, nodes, monkeypatch):
    hub = await hub_factory(rate_per_second=20, burst=2)
    counters = count_at_hub(hub, monkeypatch)
    bob, receiver = await connect_receiver(nodes, hub, "bob")
    alice = await nodes.connect("alice", hub)
    bob_aid, alice_aid = nodes.identity("bob").aid, nodes.identity("alice").aid
    connection = hub.state.relay.connections[bob_aid]
    count = 30  # fifteen times the burst
    async with asyncio.timeout(STEP_TIMEOUT_S):
        await asyncio.gather(*(alice.send(envelope_for(nodes, "alice", "bob", {"n": index}))
                               for index in range(count)))
    opened = await receiver.wait_for(count)
    assert sorted(body["n"] for _, body in opened) == list(range(count))
    assert {sender for sender, _ in opened} == {alice_aid}
    assert counters.lookups[alice_aid] == 1  # one lookup for the whole burst
    assert hub.state.relay.connections[bob_aid] is connection  # no reconnect
    await eventually(lambda: sum(counters.acks.values()) == count)
    assert set(counters.acks.values()) == {1}
    assert bob.status.state.value == "registered"


async def test_a_rate_limited_lookup_in_the_receiver_is_waited_out(hub_factory, nodes,
                                                                   monkeypatch):
    # The TCK failure: the receiver's lookup was refused and the envelope stalled until a
    # reconnect. Now the lookup waits retryAfter and the receiver never sees the refusal.
    # burst 3: bob's copy of its bucket still holds tokens when the hub's runs dry (as after a
    # restart of bob: the hub's bucket outlives connections), so the hub is what refuses.
    hub = await hub_factory(rate_per_second=10, burst=3)
    counters = count_at_hub(hub, monkeypatch)
    _, receiver = await connect_receiver(nodes, hub, "bob")
    alice = await nodes.connect("alice", hub)
    bob_aid = nodes.identity("bob").aid
    connection = hub.state.relay.connections[bob_aid]
    envelope = envelope_for(nodes, "alice", "bob", {"text": "under load"})
    drain_bucket(hub, bob_aid)
    await alice.send(envelope)
    assert await receiver.wait_for(1) == [(nodes.identity("alice").aid, {"text": "under load"})]
    assert counters.refused[bob_aid] >= 1
    assert receiver.calls[envelope["id"]] == 1  # the receiver did not fail
    await eventually(lambda: counters.acks[envelope["id"]] == 1)
    assert hub.state.relay.connections[bob_aid] is connection


async def test_a_receiver_failing_twice_gets_the_envelope_again_and_acks_once(
        hub, nodes, monkeypatch, quick_retries):
    counters = count_at_hub(hub, monkeypatch)
    _, receiver = await connect_receiver(nodes, hub, "bob")
    alice = await nodes.connect("alice", hub)
    bob_aid = nodes.identity("bob").aid
    connection = hub.state.relay.connections[bob_aid]
    envelope = envelope_for(nodes, "alice", "bob", {"text": "third time lucky"})
    receiver.fail[envelope["id"]] = 2
    await alice.send(envelope)
    assert await receiver.wait_for(1) == [(nodes.identity("alice").aid,
                                           {"text": "third time lucky"})]
    assert receiver.calls[envelope["id"]] == 3
    await eventually(lambda: counters.acks[envelope["id"]] == 1)
    assert not connection._inflight  # acknowledged on the same connection
    assert hub.state.relay.connections[bob_aid] is connection
    assert await hub.state.storage.pending(bob_aid, after_seq=0, limit=10, now=0) == []


async def test_acknowledgements_wait_for_the_flush_and_the_next_envelope_does_not(
        hub, nodes, monkeypatch):
    """The hub forgets an envelope once the receiver kept it and its flush made that durable
    (``ACK_AFTER_TURNS`` later); the receiver takes the next envelopes meanwhile."""
    counters = count_at_hub(hub, monkeypatch)
    bob, receiver = await connect_receiver(nodes, hub, "bob")
    alice = await nodes.connect("alice", hub)
    durable = asyncio.Event()
    flushes = 0

    async def flush(within: float) -> None:  # the receiver's store, syncing
        nonlocal flushes
        flushes += 1
        await durable.wait()

    bob.set_receiver(receiver, flush=flush)
    sent = [envelope_for(nodes, "alice", "bob", {"n": index}) for index in range(5)]
    for envelope in sent:
        await alice.send(envelope)
    assert [body["n"] for _, body in await receiver.wait_for(5)] == [0, 1, 2, 3, 4]
    assert sum(counters.acks.values()) == 0 and flushes >= 1
    durable.set()
    await eventually(lambda: sum(counters.acks.values()) == 5)
    assert {counters.acks[envelope["id"]] for envelope in sent} == {1}


async def test_an_acknowledgement_nothing_waits_for_waits_for_the_next_flush(hub, nodes):
    """The receiver says when: at once (a flush of its own), or with the next flush made
    anyway, ``ACK_HOLD_S`` at most (``AckTiming``)."""
    bob, receiver = await connect_receiver(nodes, hub, "bob")
    alice = await nodes.connect("alice", hub)
    timings = {0: AckTiming.AT_ONCE, 1: AckTiming.WITH_NEXT_FLUSH, 2: None}
    asked: list[float] = []

    async def receive(envelope: dict[str, Any]) -> AckTiming | None:
        await receiver(envelope)
        return timings[receiver.opened[-1][1]["n"]]

    async def flush(within: float) -> None:
        asked.append(within)

    bob.set_receiver(receive, flush=flush)
    async with asyncio.timeout(STEP_TIMEOUT_S):
        for number in timings:  # each send returns once bob's acknowledgement reached the hub
            await alice.send(envelope_for(nodes, "alice", "bob", {"n": number}))
    assert asked == [0.0, delivery_module.ACK_HOLD_S, 0.0]


async def test_a_failing_sender_waits_alone_and_keeps_its_order(hub, nodes, quick_retries):
    _, receiver = await connect_receiver(nodes, hub, "bob")
    alice = await nodes.connect("alice", hub)
    carol = await nodes.connect("carol", hub)
    alice_aid, carol_aid = nodes.identity("alice").aid, nodes.identity("carol").aid
    receiver.fail_from.add(alice_aid)
    for index in range(3):
        await alice.send(envelope_for(nodes, "alice", "bob", {"n": index}))
    for index in range(3):
        await carol.send(envelope_for(nodes, "carol", "bob", {"n": index}))
    # Alice's first envelope keeps failing; carol's go on meanwhile.
    assert [(sender, body["n"]) for sender, body in await receiver.wait_for(3)] \
        == [(carol_aid, 0), (carol_aid, 1), (carol_aid, 2)]
    receiver.fail_from.clear()
    opened = await receiver.wait_for(6)
    assert [body["n"] for sender, body in opened if sender == alice_aid] == [0, 1, 2]


async def test_send_waits_retry_after_and_succeeds(hub_factory, nodes, inbox_factory,
                                                   monkeypatch):
    hub = await hub_factory(rate_per_second=10, burst=3)
    counters = count_at_hub(hub, monkeypatch)
    inbox = inbox_factory()
    await nodes.connect("bob", hub, receiver=inbox)
    alice = await nodes.connect("alice", hub)
    alice_aid = nodes.identity("alice").aid
    drain_bucket(hub, alice_aid)  # the client's own pacing cannot know: the hub refuses
    envelope = envelope_for(nodes, "alice", "bob", {"text": "after a pause"})
    async with asyncio.timeout(STEP_TIMEOUT_S):
        await alice.send(envelope)
    assert counters.refused[alice_aid] >= 1
    assert await inbox.wait_for(1) == [envelope]


async def test_lookup_and_search_wait_retry_after(hub_factory, nodes, monkeypatch):
    hub = await hub_factory(rate_per_second=10, burst=5)
    counters = count_at_hub(hub, monkeypatch)
    await nodes.connect("bob", hub)
    alice = await nodes.connect("alice", hub)
    alice_aid, bob_aid = nodes.identity("alice").aid, nodes.identity("bob").aid
    drain_bucket(hub, alice_aid)
    async with asyncio.timeout(STEP_TIMEOUT_S):
        assert (await alice.peer(bob_aid)).aid == bob_aid
    refused = counters.refused[alice_aid]
    assert refused >= 1
    drain_bucket(hub, alice_aid)
    async with asyncio.timeout(STEP_TIMEOUT_S):
        await alice.search(SearchQuery())
    assert counters.refused[alice_aid] > refused


@pytest.mark.parametrize("burst", [1, 3], ids=["paced-here", "refused-there"])
async def test_rate_limiting_gives_up_at_the_deadline(hub_factory, nodes, monkeypatch, burst):
    # burst 1: the card publish spent this node's token, its own pacer gives up; burst 3: the
    # hub refuses, retryAfter (≈ 400 s) is past the deadline.
    hub = await hub_factory(rate_per_second=0.01, burst=burst)
    monkeypatch.setattr(connection_module, "RATE_LIMIT_DEADLINE_S", 0.5)
    await nodes.connect("bob", hub)
    alice = await nodes.connect("alice", hub)
    drain_bucket(hub, nodes.identity("alice").aid)
    async with asyncio.timeout(STEP_TIMEOUT_S):
        with pytest.raises(HubError) as caught:
            await alice.send(envelope_for(nodes, "alice", "bob", {"text": "never"}))
    assert caught.value.reason == "rate-limited" and "requests/s" in caught.value.message


async def test_concurrent_lookups_share_one_request_and_forget_asks_again(
        hub, nodes, monkeypatch):
    counters = count_at_hub(hub, monkeypatch)
    await nodes.connect("bob", hub)
    alice = await nodes.connect("alice", hub)
    bob_aid = nodes.identity("bob").aid
    async with asyncio.timeout(STEP_TIMEOUT_S):
        while (await alice.peer(bob_aid)).verification is not Verification.VERIFIED:
            alice.forget_peer(bob_aid)  # bob's card is still on its way to the hub
            await asyncio.sleep(0.02)
    before = counters.lookups[bob_aid]
    alice.forget_peer(bob_aid)
    peers = await asyncio.gather(*(alice.peer(bob_aid) for _ in range(10)))
    assert {peer.aid for peer in peers} == {bob_aid}
    assert counters.lookups[bob_aid] == before + 1
    await alice.peer(bob_aid)
    assert counters.lookups[bob_aid] == before + 1
    alice.forget_peer(bob_aid)
    await alice.peer(bob_aid)
    assert counters.lookups[bob_aid] == before + 2


async def test_an_envelope_the_receiver_failed_on_is_looked_up_afresh(
        hub, nodes, monkeypatch, quick_retries):
    counters = count_at_hub(hub, monkeypatch)
    _, receiver = await connect_receiver(nodes, hub, "bob")
    alice = await nodes.connect("alice", hub)
    alice_aid = nodes.identity("alice").aid
    await alice.send(envelope_for(nodes, "alice", "bob", {"n": 0}))
    await receiver.wait_for(1)
    assert counters.lookups[alice_aid] == 1
    failing = envelope_for(nodes, "alice", "bob", {"n": 1})
    receiver.fail[failing["id"]] = 1
    await alice.send(failing)
    await receiver.wait_for(2)
    assert counters.lookups[alice_aid] == 2  # the retry did not trust the cached entry


async def test_acks_are_not_rate_limited(hub_factory, nodes, raw):
    hub = await hub_factory(rate_per_second=0.01, burst=1)
    ws = await raw.register(hub, nodes.identity("bob"))
    drain_bucket(hub, nodes.identity("bob").aid)
    for index in range(5):
        await ws.send_json({"type": "ack", "id": f"no-such-envelope-{index}"})
    # Frames are answered in order: a refused ack would come before this lookup's answer.
    answer = await raw.ask(ws, {"type": "lookup", "rid": "1", "aid": nodes.identity("bob").aid})
    assert answer["rid"] == "1" and answer["reason"] == "rate-limited"


# -- the parts, without a hub -------------------------------------------------------------------


def test_receive_retry_delays_double_to_the_cap():
    queue = DeliveryQueue()
    queue.add({"id": "e1", "from": "A"})
    held, _ = queue.take(now=0.0)
    assert held is not None
    delays = [queue.failed(held, now=0.0) for _ in range(11)]
    assert delays[:3] == [0.5, 1.0, 2.0]
    assert max(delays) == delivery_module.RECEIVE_RETRY.cap_s == 30.0
    assert delays == sorted(delays)


def test_the_pacer_mirrors_the_hub_bucket():
    pacer = RequestPacer()
    assert pacer.reserve(now=0.0) == 0.0  # no limits known yet: no pacing
    pacer.configure(10.0, 2, now=0.0)
    assert [pacer.reserve(now=0.0) for _ in range(4)] == [0.0, 0.0, 0.1, 0.2]
    pacer.configure(10.0, 2, now=5.0)  # same limits (a reconnection): state kept
    assert pacer.reserve(now=0.0) == pytest.approx(0.3)
    fresh = RequestPacer()
    fresh.configure(10.0, 5, now=0.0)
    fresh.hold(1.0, now=0.0)  # the hub said: no token for 1 s
    assert fresh.reserve(now=0.0) == pytest.approx(1.0)


def test_the_delivery_queue_holds_back_a_failed_sender_only():
    queue = DeliveryQueue()
    for envelope_id, sender in [("a1", "A"), ("a2", "A"), ("c1", "C"), ("c2", "C")]:
        assert queue.add({"id": envelope_id, "from": sender})
    assert not queue.add({"id": "a1", "from": "A"})  # already held
    first, _ = queue.take(now=0.0)
    assert first is not None and first.id == "a1"
    assert queue.failed(first, now=0.0) == 0.5
    taken = [queue.take(now=0.1)[0] for _ in range(2)]
    assert [held.id for held in taken if held] == ["c1", "c2"]
    assert queue.take(now=0.1) == (None, 0.5)
    retry, _ = queue.take(now=0.5)
    assert retry is first
    queue.done(retry)
    nxt, _ = queue.take(now=0.5)
    assert nxt is not None and nxt.id == "a2"
    assert queue.add({"id": "a1", "from": "A"})  # acknowledged: a new delivery is taken


def _peer(identity: Identity, *, last_seen: float,
          verification: Verification = Verification.VERIFIED,
          key_state: KeyState = KeyState.FRESH) -> PeerInfo:
    return PeerInfo(aid=identity.aid, verification=verification, key_state=key_state,
                    history=verify_history(identity.history), last_seen=last_seen)


def test_the_peer_cache_keeps_only_fresh_verified_entries_for_its_ttl(tmp_path):
    identity = Identity.create(tmp_path / "identity")
    verifier = PeerVerifier(freshness_s=100.0)
    cache = PeerCache(verifier, ttl_s=30.0)
    cache.put(_peer(identity, last_seen=1000.0), epoch=cache.epoch, now=0.0)
    kept = cache.get(identity.aid, now=29.0, wall=1050.0)
    assert kept is not None and kept.key_state is KeyState.FRESH
    assert cache.get(identity.aid, now=30.0, wall=1050.0) is None  # the TTL passed
    cache.put(_peer(identity, last_seen=1000.0), epoch=cache.epoch, now=0.0)
    # The window ends while the entry is kept: it reads stale, so it is asked again.
    assert cache.get(identity.aid, now=1.0, wall=1100.5) is None
    cache.put(_peer(identity, last_seen=1000.0, key_state=KeyState.STALE), epoch=cache.epoch)
    cache.put(_peer(identity, last_seen=1000.0, verification=Verification.UNVERIFIED),
              epoch=cache.epoch)
    assert len(cache) == 0
    epoch = cache.epoch
    cache.forget(identity.aid)
    cache.put(_peer(identity, last_seen=1000.0), epoch=epoch)  # began before the forget
    assert len(cache) == 0
