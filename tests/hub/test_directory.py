"""Directory: verified cards, search, the official list, HTTP reads."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest

from anet_core.link import HubError, KeyState, SearchQuery, Verification
from anet_core.link.card import CardContent
from anet_hub import admin


def card(name: str, description: str = "", skills: list[dict] | None = None) -> CardContent:
    return CardContent(name=name, description=description, skills=skills or [])


async def test_a_published_card_is_fetched_verified(hub, nodes):
    skills = [{"id": "summarize", "name": "Summarize", "tags": ["text", "nlp"]}]
    await nodes.connect("bob", hub, card=card("Bob", "Summaries of long papers", skills))
    alice = await nodes.connect("alice", hub)
    bob_aid = nodes.identity("bob").aid
    peer = await _peer_when_carded(alice, bob_aid)
    assert peer.verification is Verification.VERIFIED
    assert peer.key_state is KeyState.FRESH
    assert peer.card["name"] == "Bob" and peer.card["skills"][0]["tags"] == ["text", "nlp"]
    assert peer.card["signer"] == bob_aid and peer.home_hub == hub.url
    assert peer.encryption_key == nodes.identity("bob").encryption_public_key
    assert json.loads(peer.card_bytes) == peer.card


async def _peer_when_carded(client, aid):
    async with asyncio.timeout(10):
        while True:
            peer = await client.peer(aid)
            if peer.card is not None or peer.verification is Verification.VERIFIED:
                return peer
            await asyncio.sleep(0.05)


async def test_a_card_tampered_at_the_hub_is_unverified_and_not_passed_on(hub, nodes):
    await nodes.connect("bob", hub, card=card("Bob"))
    alice = await nodes.connect("alice", hub)
    bob_aid = nodes.identity("bob").aid
    await _peer_when_carded(alice, bob_aid)
    with sqlite3.connect(hub.config.database) as db:
        stored = json.loads(db.execute("SELECT card FROM agents WHERE aid = ?",
                                       (bob_aid,)).fetchone()[0])
        stored["name"] = "Totally Official Bank"
        db.execute("UPDATE agents SET card = ? WHERE aid = ?", (json.dumps(stored), bob_aid))
    alice.forget_peer(bob_aid)  # read the directory again, not the verified copy kept briefly
    peer = await alice.peer(bob_aid)
    assert peer.verification is Verification.UNVERIFIED
    assert peer.card is None and peer.card_bytes is None and peer.home_hub is None


async def test_a_rolled_back_history_is_unverified(hub, nodes):
    first = await nodes.connect("bob", hub)
    alice = await nodes.connect("alice", hub)
    bob = nodes.identity("bob")
    genesis_only = bob.history
    await first.close()
    bob.rotate()
    second = await nodes.connect("bob", hub)  # registers the longer history
    assert (await _peer_when_carded(alice, bob.aid)).key_seq == 1
    await second.close()
    with sqlite3.connect(hub.config.database) as db:
        db.execute("UPDATE agents SET history = ? WHERE aid = ?", (json.dumps(genesis_only),
                                                                   bob.aid))
    alice.forget_peer(bob.aid)
    peer = await alice.peer(bob.aid)
    assert peer.verification is Verification.UNVERIFIED and peer.encryption_key is None


async def test_an_unknown_agent_is_an_error(hub, nodes):
    alice = await nodes.connect("alice", hub)
    with pytest.raises(HubError) as caught:
        await alice.peer("a" * 32)
    assert caught.value.reason == "unknown-agent"


async def test_search_by_skill_tag_text_with_cursor_and_limit(hub, nodes):
    for index in range(7):
        skills = [{"id": "translate" if index % 2 else "summarize",
                   "tags": ["lang"] if index % 2 else ["text"]}]
        await nodes.connect(f"n{index}", hub, card=card(f"Agent {index}",
                                                        "likes cats" if index < 3 else "dogs",
                                                        skills))
    alice = await nodes.connect("alice", hub)

    async def all_pages(**query) -> list[str]:
        found, cursor = [], None
        while True:
            page = await alice.search(SearchQuery(cursor=cursor, **query))
            found += [peer.aid for peer in page.peers]
            assert all(peer.verification is Verification.VERIFIED for peer in page.peers)
            if page.next_cursor is None:
                return found
            cursor = page.next_cursor

    async def settled() -> None:
        async with asyncio.timeout(10):
            while len(await all_pages(q="agent")) < 7:
                await asyncio.sleep(0.05)

    await settled()
    aids = {f"n{index}": nodes.identity(f"n{index}").aid for index in range(7)}
    everyone = await all_pages(limit=2)
    assert everyone == sorted(everyone)  # stable order across pages, no repeats
    assert set(everyone) == set(aids.values()) | {nodes.identity("alice").aid}
    page = await alice.search(SearchQuery(limit=2))
    assert len(page.peers) == 2 and page.next_cursor is not None
    assert set(await all_pages(skill="translate", limit=1)) == {aids[f"n{i}"] for i in (1, 3, 5)}
    assert set(await all_pages(tag="TEXT")) == {aids[f"n{i}"] for i in (0, 2, 4, 6)}
    assert set(await all_pages(q="cats")) == {aids[f"n{i}"] for i in (0, 1, 2)}
    assert set(await all_pages(q="agent 4 dogs")) == {aids["n4"]}
    with pytest.raises(HubError) as caught:
        await alice.search(SearchQuery(cursor="not-a-cursor"))
    assert caught.value.reason == "bad-cursor"
    with pytest.raises(HubError) as caught:
        await alice.search(SearchQuery(limit=101))
    assert caught.value.reason == "bad-frame" and "100" in caught.value.message


async def test_the_official_list_is_signed_and_verified(hub, nodes):
    await nodes.connect("bob", hub, card=card("Bob"))
    alice = await nodes.connect("alice", hub)
    bob_aid = nodes.identity("bob").aid
    assert (await _peer_when_carded(alice, bob_aid)).official is False
    members = await asyncio.to_thread(admin.change_official, hub.config.data_dir, bob_aid,
                                      add=True)
    assert members == [bob_aid]
    alice.forget_peer(bob_aid)  # the new list comes with the next answer from the hub
    assert (await alice.peer(bob_aid)).official is True
    with sqlite3.connect(hub.config.database) as db:  # the hub forges a list naming alice
        doc = json.loads(db.execute("SELECT doc FROM official_list").fetchone()[0])
        doc["members"].append(nodes.identity("alice").aid)
        doc["version"] += 1
        db.execute("UPDATE official_list SET doc = ?", (json.dumps(doc),))
    assert (await alice.peer(nodes.identity("alice").aid)).official is False
    assert (await alice.peer(bob_aid)).official is True


async def test_official_removal_is_seen(hub, nodes):
    await nodes.connect("bob", hub, card=card("Bob"))
    alice = await nodes.connect("alice", hub)
    bob_aid = nodes.identity("bob").aid
    await asyncio.to_thread(admin.change_official, hub.config.data_dir, bob_aid, add=True)
    assert (await _peer_when_carded(alice, bob_aid)).official is True
    await asyncio.to_thread(admin.change_official, hub.config.data_dir, bob_aid, add=False)
    assert (await alice.peer(bob_aid)).official is True  # kept briefly: no new list seen yet
    await alice.peer(nodes.identity("alice").aid)  # any answer carries the new list ...
    assert (await alice.peer(bob_aid)).official is False  # ... and the kept entry follows it


async def test_http_reads(hub, nodes, http):
    await nodes.connect("bob", hub, card=card("Bob", "reads papers"))
    bob_aid = nodes.identity("bob").aid
    async with http.get(hub.http + "/v1/health") as response:
        health = await response.json()
    assert health["status"] == "ok" and health["connected"] == 1
    async with asyncio.timeout(10):
        while True:
            async with http.get(hub.http + "/v1/agents", params={"q": "papers"}) as response:
                found = await response.json()
            if found["entries"]:
                break
            await asyncio.sleep(0.05)
    assert found["entries"][0]["aid"] == bob_aid and found["entries"][0]["online"] is True
    async with http.get(hub.http + f"/v1/agents/{bob_aid}") as response:
        assert (await response.json())["entry"]["card"]["name"] == "Bob"
    async with http.get(hub.http + "/v1/agents/" + "a" * 32) as response:
        assert response.status == 404 and (await response.json())["error"] == "unknown-agent"
    async with http.get(hub.http + "/v1/agents", params={"limit": "500"}) as response:
        assert response.status == 400 and (await response.json())["error"] == "bad-query"
