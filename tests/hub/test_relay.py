"""Relay: online and offline delivery, acknowledgements, TTL, limits, bad input, restarts."""

from __future__ import annotations

import asyncio
import json
import logging
import time

import pytest

from anet_core.identity import verify_history
from anet_core.link import HubError
from anet_core.protocol.envelope import open_envelope, seal
from anet_core.util.canonical import compact_json
from anet_hub.storage import StorageError
from tests.support.waiting import eventually

SECRET = "TOP-SECRET-PLAINTEXT-7f3a9c"


def envelope_for(nodes, sender: str, recipient: str, body: dict) -> dict:
    to = nodes.identity(recipient)
    return seal(nodes.identity(sender), to.aid, to.encryption_public_key, body)


async def queued(hub, name_aid: str) -> list[str]:
    items = await hub.state.storage.pending(name_aid, after_seq=0, limit=1000, now=0)
    return [item.id for item in items]


async def test_online_relay_and_ack(hub, nodes, inbox_factory):
    inbox = inbox_factory()
    await nodes.connect("bob", hub, receiver=inbox)
    alice = await nodes.connect("alice", hub)
    envelope = envelope_for(nodes, "alice", "bob", {"text": "hello bob"})
    await alice.send(envelope)
    [received] = await inbox.wait_for(1)
    assert received == envelope
    opened = open_envelope(received, nodes.identity("bob"),
                           verify_history(nodes.identity("alice").history))
    assert opened.body == {"text": "hello bob"}
    bob_aid = nodes.identity("bob").aid
    await eventually(lambda: not hub.state.relay.connections[bob_aid]._inflight)
    assert await queued(hub, bob_aid) == []  # acknowledged, so forgotten


async def test_an_envelope_handed_over_as_its_text_arrives_as_the_envelope(hub, nodes,
                                                                         inbox_factory):
    # The outbox hands the link the JSON it stored with the sealed envelope, as it is.
    inbox = inbox_factory()
    await nodes.connect("bob", hub, receiver=inbox)
    alice = await nodes.connect("alice", hub)
    envelopes = [envelope_for(nodes, "alice", "bob", {"n": index}) for index in range(2)]
    await alice.send(compact_json(envelopes[0]))
    await alice.send(json.dumps(envelopes[1], indent=1))  # any JSON text of it (older stores)
    assert await inbox.wait_for(2) == envelopes


async def test_offline_queue_is_delivered_in_order_on_reconnect(hub, nodes, inbox_factory):
    bob = await nodes.connect("bob", hub)
    await bob.close()
    alice = await nodes.connect("alice", hub)
    sent = [envelope_for(nodes, "alice", "bob", {"n": index}) for index in range(20)]
    for envelope in sent:
        await alice.send(envelope)
    assert len(await queued(hub, nodes.identity("bob").aid)) == 20
    inbox = inbox_factory()
    await nodes.connect("bob", hub, receiver=inbox)
    received = await inbox.wait_for(20)
    assert [envelope["id"] for envelope in received] == [envelope["id"] for envelope in sent]


async def test_expired_envelopes_are_not_delivered(hub_factory, nodes, inbox_factory):
    hub = await hub_factory(queue_ttl_s=0.3)
    bob = await nodes.connect("bob", hub)
    await bob.close()
    alice = await nodes.connect("alice", hub)
    await alice.send(envelope_for(nodes, "alice", "bob", {"text": "too late"}))
    await asyncio.sleep(0.5)
    inbox = inbox_factory()
    await nodes.connect("bob", hub, receiver=inbox)
    await asyncio.sleep(0.3)
    assert inbox.envelopes == []
    assert await hub.state.storage.purge_expired(time.time()) == 1


async def test_an_unacknowledged_envelope_is_redelivered_after_reconnect(
        hub, nodes, inbox_factory):
    failing = inbox_factory(fail=1_000)  # fails on every try this connection makes
    bob = await nodes.connect("bob", hub, receiver=failing)
    alice = await nodes.connect("alice", hub)
    first, second = (envelope_for(nodes, "alice", "bob", {"n": n}) for n in (1, 2))
    await alice.send(first)
    await alice.send(second)
    bob_aid = nodes.identity("bob").aid
    await eventually(lambda: set(hub.state.relay.connections[bob_aid]._inflight)
                     == {first["id"], second["id"]})
    assert failing.envelopes == []
    assert await queued(hub, bob_aid) == [first["id"], second["id"]]  # kept: never acknowledged
    await bob.close()
    inbox = inbox_factory()
    await nodes.connect("bob", hub, receiver=inbox)
    assert [envelope["id"] for envelope in await inbox.wait_for(2)] == [first["id"],
                                                                        second["id"]]


async def test_oversize_envelopes_are_refused_naming_the_limit(hub_factory, nodes, raw):
    hub = await hub_factory(max_envelope_bytes=4096)
    await nodes.connect("bob", hub)
    big = envelope_for(nodes, "alice", "bob", {"text": "x" * 8000})
    ws = await raw.register(hub, nodes.identity("alice"))
    answer = await raw.ask(ws, {"type": "send", "rid": "1", "envelope": big})
    assert answer["reason"] == "envelope-too-large" and "4096" in answer["message"]
    alice = await nodes.connect("alice", hub)
    with pytest.raises(HubError) as caught:
        await alice.send(big)
    assert caught.value.reason == "envelope-too-large" and "4096" in caught.value.message
    await alice.send(envelope_for(nodes, "alice", "bob", {"text": "small"}))


async def test_the_rate_limit_is_named_in_the_refusal(hub_factory, nodes, raw):
    hub = await hub_factory(rate_per_second=1, burst=3)
    ws = await raw.register(hub, nodes.identity("alice"))
    lookup = {"type": "lookup", "aid": nodes.identity("alice").aid}
    for index in range(3):
        assert (await raw.ask(ws, lookup | {"rid": str(index)}))["type"] == "entry"
    answer = await raw.ask(ws, lookup | {"rid": "4"})
    assert answer["reason"] == "rate-limited" and answer["retryAfter"] > 0
    assert "1 requests/s (burst 3)" in answer["message"]


async def test_bad_frames_and_envelopes_are_refused_and_logged(hub, nodes, raw, caplog):
    caplog.set_level(logging.INFO, logger="anet_hub")
    await nodes.connect("bob", hub)
    ws = await raw.register(hub, nodes.identity("alice"))
    good = envelope_for(nodes, "alice", "bob", {"text": "hi"})

    async def reason(frame: dict | str) -> str:
        if isinstance(frame, str):
            await ws.send_str(frame)
            return (await ws.receive_json(timeout=5))["reason"]
        return (await raw.ask(ws, frame))["reason"]

    assert await reason("this is not json") == "bad-frame"
    assert await reason({"type": "teleport", "rid": "1"}) == "bad-frame"
    assert await reason({"type": "send", "rid": "2", "envelope": {"v": 1}}) \
        == "malformed-envelope"
    assert await reason({"type": "send", "rid": "3", "envelope": good | {"ct": "!!"}}) \
        == "malformed-envelope"
    forged = envelope_for(nodes, "carol", "bob", {"text": "hi"})
    assert await reason({"type": "send", "rid": "4", "envelope": forged}) == "wrong-sender"
    stranger = envelope_for(nodes, "alice", "nobody", {"text": "hi"})
    assert await reason({"type": "send", "rid": "5", "envelope": stranger}) \
        == "unknown-recipient"
    assert (await raw.ask(ws, {"type": "send", "rid": "6", "envelope": good}))["type"] \
        == "accepted"
    assert "reason=malformed-envelope" in caplog.text and "reason=wrong-sender" in caplog.text
    assert "event=bad-frame" in caplog.text


async def test_a_hub_restart_keeps_queued_envelopes(hub, nodes, inbox_factory):
    bob = await nodes.connect("bob", hub)
    await bob.close()
    alice = await nodes.connect("alice", hub)
    envelope = envelope_for(nodes, "alice", "bob", {"text": "survives"})
    await alice.send(envelope)
    await hub.stop()
    await hub.start()
    inbox = inbox_factory()
    await nodes.connect("bob", hub, receiver=inbox)
    assert await inbox.wait_for(1) == [envelope]


async def test_a_full_hub_storage_refuses_and_keeps_serving(hub_factory, nodes, http):
    hub = await hub_factory(max_storage_bytes=256 * 1024)
    bob = await nodes.connect("bob", hub)
    await bob.close()
    alice = await nodes.connect("alice", hub)
    reasons = set()
    for index in range(40):
        try:
            await alice.send(envelope_for(nodes, "alice", "bob", {"pad": "y" * 20_000,
                                                                  "n": index}))
        except HubError as error:
            reasons.add(error.reason)
            assert "not stored" in error.message
            break
    assert reasons == {"hub-storage-full"}
    async with http.get(hub.http + "/v1/health") as response:
        assert response.status == 200
    # Counted under the operation that failed (anet_hub.counted).
    async with http.get(hub.http + "/metrics") as response:
        assert 'anet_hub_storage_errors_total{operation="enqueue"} 1' in await response.text()
    # The rail's ledger, reached through the same storage, is counted under ledger.<method>.
    with pytest.raises(StorageError):
        for index in range(200):
            await hub.state.storage.ledger.credit(f"{index:032d}", "USD", 1,
                                                  transaction="x" * 4000 + str(index),
                                                  now=time.time())
    async with http.get(hub.http + "/metrics") as response:
        assert 'anet_hub_storage_errors_total{operation="ledger.credit"} 1' in \
            await response.text()
    assert (await alice.peer(nodes.identity("alice").aid)).aid == nodes.identity("alice").aid


async def test_the_hub_stores_no_plaintext(hub, nodes, inbox_factory):
    bob = await nodes.connect("bob", hub)
    await bob.close()
    alice = await nodes.connect("alice", hub)
    for index in range(3):
        await alice.send(envelope_for(nodes, "alice", "bob", {"text": f"{SECRET}-{index}",
                                                              "artifact": SECRET * 10}))
    files = [path for path in hub.config.data_dir.rglob("*") if path.is_file()]
    assert any(path.name == "hub.db" for path in files)
    stored = b"".join(path.read_bytes() for path in files)
    assert b"envelopes" in stored  # the inspection reads the real tables
    assert SECRET.encode() not in stored
    inbox = inbox_factory()
    await nodes.connect("bob", hub, receiver=inbox)
    await inbox.wait_for(3)
    stored = b"".join(path.read_bytes() for path in files if path.exists())
    assert SECRET.encode() not in stored


async def test_an_envelope_for_a_connected_node_is_accepted_when_it_acks_and_never_stored(
        hub, nodes, inbox_factory, monkeypatch):
    monkeypatch.setattr("anet_hub.delivery.STORE_AFTER_S", 60.0)  # slow is not tested here
    held = asyncio.Event()
    release = asyncio.Event()
    inbox = inbox_factory()

    async def holding(envelope: dict) -> None:
        held.set()
        await release.wait()
        await inbox(envelope)

    bob = await nodes.connect("bob", hub, receiver=holding)
    alice = await nodes.connect("alice", hub)
    bob_aid = nodes.identity("bob").aid
    envelope = envelope_for(nodes, "alice", "bob", {"text": "live"})
    sending = asyncio.create_task(alice.send(envelope))
    await asyncio.wait_for(held.wait(), 10)
    assert not sending.done()  # bob has not kept it yet: alice keeps it too
    assert await queued(hub, bob_aid) == []  # and the hub never stored it
    release.set()
    await asyncio.wait_for(sending, 10)
    assert [item["id"] for item in await inbox.wait_for(1)] == [envelope["id"]]
    assert await queued(hub, bob_aid) == []

    # Bob goes away holding one: the hub stores it, tells alice accepted, delivers it later.
    release.clear()
    held.clear()
    second = envelope_for(nodes, "alice", "bob", {"text": "stored when bob left"})
    sending = asyncio.create_task(alice.send(second))
    await asyncio.wait_for(held.wait(), 10)
    assert not sending.done()
    await bob.close()
    await asyncio.wait_for(sending, 10)
    assert await queued(hub, bob_aid) == [second["id"]]
    later = inbox_factory()
    await nodes.connect("bob", hub, receiver=later)
    assert [item["id"] for item in await later.wait_for(1)] == [second["id"]]
