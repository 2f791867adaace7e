"""Registration: a signed challenge; forged, truncated and replayed answers refused; approval."""

from __future__ import annotations

import asyncio
import shutil

from anet_core.identity import Identity
from anet_core.link import JoinState
from anet_core.util.canonical import b64u
from anet_hub import admin
from tests.support.waiting import eventually


async def test_a_node_registers_and_says_so(hub, nodes):
    client = await nodes.connect("alice", hub)
    assert client.status.sentence == f"Registered at {hub.url}."
    record = await hub.state.storage.get_agent(nodes.identity("alice").aid)
    assert record is not None and record.state.value == "registered"
    assert record.history == nodes.identity("alice").history


async def test_a_forged_signature_is_refused(hub, raw, nodes):
    ws, challenge = await raw.open(hub)
    frame = raw.register_frame(nodes.identity("alice"), challenge, hub.url)
    frame["signature"] = b64u(nodes.identity("mallory").sign(b"anything"))
    answer = await raw.ask(ws, frame)
    assert answer["type"] == "error" and answer["reason"] == "bad-signature"
    assert await hub.state.storage.get_agent(nodes.identity("alice").aid) is None


async def test_a_replayed_challenge_answer_is_refused(hub, raw, nodes):
    ws, challenge = await raw.open(hub)
    frame = raw.register_frame(nodes.identity("alice"), challenge, hub.url)
    assert (await raw.ask(ws, frame))["type"] == "registered"
    other, _ = await raw.open(hub)
    answer = await raw.ask(other, frame)  # the same signed answer on a new connection
    assert answer["reason"] == "challenge-mismatch"


async def test_an_answer_signed_for_another_hub_url_is_refused(hub, raw, nodes):
    ws, challenge = await raw.open(hub)
    frame = raw.register_frame(nodes.identity("alice"), challenge, "ws://evil.example:80")
    answer = await raw.ask(ws, frame)
    assert answer["reason"] == "wrong-hub-url"


async def test_a_truncated_history_is_refused(hub, raw, nodes, tmp_path):
    identity = nodes.identity("alice")
    shutil.copytree(identity.directory, tmp_path / "before-rotation")
    identity.rotate()
    await raw.register(hub, identity)
    older = Identity.load(tmp_path / "before-rotation")  # same AID, one statement fewer
    ws, challenge = await raw.open(hub)
    answer = await raw.ask(ws, raw.register_frame(older, challenge, hub.url))
    assert answer["type"] == "error" and answer["reason"] == "history-truncated"


async def test_a_frame_before_registration_is_refused(hub, raw):
    ws, _ = await raw.open(hub)
    answer = await raw.ask(ws, {"type": "lookup", "rid": "1", "aid": "a" * 32})
    assert answer["reason"] == "not-registered"


async def test_approval_flow_pending_then_registered(hub_factory, nodes):
    hub = await hub_factory(approval=True)
    client = await nodes.connect("alice", hub, wait=JoinState.PENDING)
    aid = nodes.identity("alice").aid
    assert client.status.sentence == (f"Waiting for the hub operator at {hub.url} to approve "
                                      "this node.")
    waiting = await asyncio.to_thread(admin.pending, hub.config.data_dir)
    assert [agent.aid for agent in waiting] == [aid]
    await asyncio.to_thread(admin.approve, hub.config.data_dir, aid)
    await eventually(lambda: client.status.state is JoinState.REGISTERED)
    assert await asyncio.to_thread(admin.pending, hub.config.data_dir) == []


async def test_a_pending_node_cannot_relay(hub_factory, raw, nodes):
    hub = await hub_factory(approval=True)
    ws, challenge = await raw.open(hub)
    answer = await raw.ask(ws, raw.register_frame(nodes.identity("alice"), challenge, hub.url))
    assert answer == {**answer, "type": "registered", "state": "pending"}
    refused = await raw.ask(ws, {"type": "lookup", "rid": "1", "aid": "a" * 32})
    assert refused["reason"] == "not-approved"


async def test_the_hub_key_is_pinned_at_first_registration(hub_factory, nodes, caplog):
    hub = await hub_factory()
    client = await nodes.connect("alice", hub)
    await client.close()
    # Another hub (another operator key) now answers at the same address.
    port = hub.port
    await hub.stop()
    impostor = await hub_factory()
    await impostor.stop()
    impostor.port = port
    await impostor.start()
    again = await nodes.connect("alice", impostor, wait=None)
    await eventually(lambda: "hub-identity-changed" in caplog.text)
    assert again.status.state is JoinState.UNREACHABLE
    assert "unreachable since" in again.status.sentence
    assert await impostor.state.storage.get_agent(nodes.identity("alice").aid) is None
