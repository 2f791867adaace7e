"""The node's hub link: join states and their sentences, backoff, URLs, the link a node opens."""

from __future__ import annotations

import json
import re
import shutil
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import replace
from pathlib import Path

import pytest

from anet_core import hookimpl
from anet_core.identity import Identity, sign_document
from anet_core.link import HubError, JoinState, SearchQuery, Verification
from anet_core.link.client import HubClient
from anet_core.link.connection import RECONNECT, normalize_hub_url
from anet_core.node import Node
from anet_core.plugins import Plugins
from anet_core.records import SkillSource
from tests.support.hubs import RunningHub
from tests.support.nodes import open_node, plugins_with, prepare
from tests.support.processes import free_port
from tests.support.waiting import eventually

ALICE = {"name": "Alice", "description": "answers questions",
         "skills": [{"id": "qa", "tags": ["questions"]}]}


def alice(root: Path, url: str | None,
          plugins: Plugins | None = None) -> AbstractAsyncContextManager[Node]:
    """A node with a configured card; its hub link is the real one config.json names."""
    prepare(root, hub={"url": url}, node=ALICE)
    return open_node(root, plugins=plugins)


async def found(client, query: SearchQuery) -> list:
    """The directory's answer once it lists someone (the card is published in the background)."""
    for _ in range(100):
        page = await client.search(query)
        if page.peers:
            return page.peers
    return []


async def test_not_joined(tmp_path):
    async with alice(tmp_path, None) as node:
        link = node.hub
        assert link.status.state is JoinState.NOT_JOINED
        assert link.status.sentence == "Not joined to a hub: run `anet join <hub-url>`."
        with pytest.raises(HubError) as caught:
            await link.send({})
        assert caught.value.reason == "not-joined" and "anet join" in caught.value.message


async def test_unreachable_hub_sentence(tmp_path):
    port = free_port()
    async with alice(tmp_path, f"ws://127.0.0.1:{port}") as node:
        link = node.hub
        status = link.status
        assert status.state is JoinState.UNREACHABLE
        assert re.fullmatch(rf"Hub ws://127\.0\.0\.1:{port} unreachable since "
                            r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\+00:00; retrying\.", status.sentence)
        with pytest.raises(HubError) as caught:
            await link.search(SearchQuery())
        assert caught.value.reason == "hub-unreachable"


async def test_the_node_publishes_its_configured_card(tmp_path, hub, nodes):
    async with alice(tmp_path, hub.url) as node:
        link = node.hub
        assert link.status.state is JoinState.REGISTERED
        assert (tmp_path / "hub-pin.json").exists()
        watcher = await nodes.connect("watcher", hub)
        [peer] = await found(watcher, SearchQuery(tag="questions"))
        assert peer.aid == node.identity.aid and peer.verification is Verification.VERIFIED
        assert peer.card["name"] == "Alice" and peer.card["skills"][0]["id"] == "qa"
        assert peer.card["homeHub"] == hub.url


async def test_rejoin_follows_a_new_url(tmp_path, hub_factory):
    first, second = await hub_factory(), await hub_factory()
    identity = Identity.create(tmp_path / "identity")
    client = HubClient(identity, url=first.url, pin_path=tmp_path / "pin.json")
    await client.start()
    try:
        assert client.status.sentence == f"Registered at {first.url}."
        status = await client.rejoin(second.url)
        assert status.sentence == f"Registered at {second.url}."
        assert second.state.relay.online(identity.aid)
    finally:
        await client.close()


async def test_a_link_fails_over_to_the_next_instance_that_proves_the_pinned_hub(
        tmp_path, hub_factory, caplog):
    """Joined with three URLs: registered at the first; once it is gone, the next is another
    hub (another identity) and is refused, and the third, an instance of the pinned hub (its
    identity copied), takes the node."""
    first = await hub_factory()
    shutil.copytree(first.config.data_dir / "identity", tmp_path / "twin" / "identity")
    stranger, twin = await hub_factory(), await hub_factory(data_dir=tmp_path / "twin")
    identity = Identity.create(tmp_path / "identity")
    client = HubClient(identity, url=first.url, pin_path=tmp_path / "pin.json",
                       instances=[stranger.url, twin.url])
    await client.start()
    try:
        assert client.status.sentence == f"Registered at {first.url}."
        await first.stop()
        await eventually(lambda: client.status.state is JoinState.REGISTERED
                         and client.status.hub_url == twin.url, "registered at the twin")
        assert "reason=hub-identity-changed" in caplog.text
        assert not stranger.state.relay.online(identity.aid)
        await twin.stop()
        await eventually(lambda: client.status.state is JoinState.UNREACHABLE, "all gone")
        assert re.fullmatch(r"Hub ws://\S+ \(and its 2 other instances\) unreachable since "
                            r"\S+; retrying\.", client.status.sentence), client.status.sentence
    finally:
        await client.close()


async def test_a_link_learns_the_instances_its_hub_advertises(tmp_path, hub_factory, caplog):
    """Joined at one URL, the node learns the instance URLs the hub signs into its challenge,
    keeps them with the pin, and fails over to them: at once, and after a restart of the node
    while the URL it was joined with is still down. A list signed by another key is ignored."""
    twin_port = free_port()
    twin_url = f"ws://localhost:{twin_port}"  # another spelling of 127.0.0.1: another URL
    first = await hub_factory(public_url=twin_url)
    shutil.copytree(first.config.data_dir / "identity", tmp_path / "twin" / "identity")
    twin = await RunningHub(replace(first.config, data_dir=tmp_path / "twin"),
                            port=twin_port).start()
    identity, pin = Identity.create(tmp_path / "identity"), tmp_path / "pin.json"
    try:
        async with running_client(identity, first.url, pin) as client:
            assert client.status.hub_urls == (first.url, twin_url)
            assert json.loads(pin.read_text())["instances"]["urls"] == [twin_url]
            await first.stop()
            await eventually(lambda: client.status.state is JoinState.REGISTERED
                             and client.status.hub_url == twin_url, "registered at the twin")
        async with running_client(identity, first.url, pin) as client:  # first still down
            await eventually(lambda: client.status.state is JoinState.REGISTERED
                             and client.status.hub_url == twin_url, "the twin, after a restart")
            assert client.status.as_dict()["hubUrls"] == [first.url, twin_url]

        # An advertisement signed by someone else than the pinned hub is not followed.
        stranger = Identity.create(tmp_path / "stranger")
        forged = sign_document(stranger, {"type": "anet.hub-instances", "hub": stranger.aid,
                                          "urls": ["ws://127.0.0.1:9"], "issuedAt": 1})
        twin.state.advertisement.doc = forged
        async with running_client(identity, twin_url, pin) as client:
            assert client.status.hub_urls == (twin_url,)
        assert "event=hub-instances-ignored" in caplog.text
        assert "reason=hub-instances-wrong-signer" in caplog.text
    finally:
        await twin.stop()


async def test_a_link_follows_the_instances_its_hub_announces(tmp_path, hub_factory):
    """An instance that starts after the node connected is announced on the open connection
    (an ``instances`` frame): the node fails over to it from then on, and keeps it."""
    hub = await hub_factory()  # no --public-url: nothing advertised yet
    identity, pin = Identity.create(tmp_path / "identity"), tmp_path / "pin.json"
    async with running_client(identity, hub.url, pin) as client:
        assert client.status.hub_urls == (hub.url,)
        started = f"ws://127.0.0.1:{free_port()}"
        hub.state.advertisement.update([started])
        await eventually(lambda: client.status.hub_urls == (hub.url, started), "announced")
        assert json.loads(pin.read_text())["instances"]["urls"] == [started]


@asynccontextmanager
async def running_client(identity: Identity, url: str, pin: Path) -> AsyncIterator[HubClient]:
    client = HubClient(identity, url=url, pin_path=pin)
    await client.start()
    try:
        yield client
    finally:
        await client.close()


def test_reconnection_backoff_is_capped_and_jittered():
    delays = [RECONNECT.delay(retry) for retry in range(40)]
    assert all(0 < delay <= RECONNECT.cap_s for delay in delays)
    assert delays[0] <= 0.5 and max(delays) > RECONNECT.cap_s / 2
    assert len({round(RECONNECT.delay(30), 6) for _ in range(20)}) > 1


@pytest.mark.parametrize(("given", "expected"), [
    ("http://127.0.0.1:8765", "ws://127.0.0.1:8765"),
    ("https://Hub.Example.org/", "wss://hub.example.org"),
    ("ws://h:1/v1/ws", "ws://h:1"),
    ("wss://h/prefix/v1/ws", "wss://h/prefix"),
])
def test_hub_urls_are_normalized(given, expected):
    assert normalize_hub_url(given) == expected


@pytest.mark.parametrize("bad", ["ftp://h", "h:1", "ws://"])
def test_bad_hub_urls_are_refused(bad):
    with pytest.raises(ValueError, match="is not a hub URL"):
        normalize_hub_url(bad)


async def test_module_skills_are_published_after_the_configured_ones(tmp_path, hub, nodes):
    class Greeter:
        @hookimpl
        def anet_card_skills(self, node):
            async def read():
                return [{"id": "greet", "name": "Greet", "description": "", "tags": ["hello"]},
                        {"id": "qa", "name": "not the configured one", "tags": []}]

            async def broken():
                raise RuntimeError("the module's source is down")

            return [SkillSource("greeter", read), SkillSource("broken", broken)]

    async with alice(tmp_path, hub.url, plugins_with(Greeter())):
        watcher = await nodes.connect("watcher", hub)
        [peer] = await found(watcher, SearchQuery(tag="hello"))
        skills = peer.card["skills"]
        assert [skill["id"] for skill in skills] == ["qa", "greet"]
        assert skills[0]["name"] == ""  # the configured entry wins over a module's
