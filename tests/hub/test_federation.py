"""Federation between hubs of different operators (each names the other's key): alice homed at
hub one finds bob homed at hub two and gets her tasks done by him, both ways through both hubs;
a hub that does not federate back is named in the refusal and in the task's ``anet.reason``;
approval, the official list and reviews stay per hub. Real hubs (in this process, embedded
storage) and real nodes with their task layers."""

from __future__ import annotations

import shutil
from contextlib import AsyncExitStack
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

from anet_core.identity import Identity
from anet_core.tasks import TaskError
from anet_hub.app import HubConfig
from anet_hub.federation import FederationLimits, PeerHub
from tests.hub.network import Provider, all_completed, send_tasks, start_node
from tests.support.hubs import RunningHub, get_json
from tests.support.processes import free_port
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(120)


@pytest.fixture
async def hubs(tmp_path: Path) -> Any:
    """``await hubs(name, *peers, **config)`` (re)starts hub ``name`` naming ``peers``; each hub
    keeps its port, fixed in advance, so that the others can name it before it runs."""
    ports = {name: free_port() for name in ("one", "two", "three")}
    running: dict[str, RunningHub] = {}

    async def start(name: str, *federate: str, **overrides: Any) -> RunningHub:
        if name in running:
            await running.pop(name).stop()
        peers = tuple(PeerHub(identity(tmp_path, peer).aid, f"ws://127.0.0.1:{ports[peer]}")
                      for peer in federate)
        identity(tmp_path, name)
        config = HubConfig(data_dir=tmp_path / name, federate=peers, **overrides)
        running[name] = await RunningHub(config, port=ports[name]).start()
        return running[name]

    yield start
    for hub in running.values():
        await hub.stop()


def identity(root: Path, name: str) -> Identity:
    """The operator key of hub ``name``, made before the hub first starts."""
    directory = root / name / "identity"
    if (directory / "history.json").exists():
        return Identity.load(directory)
    return Identity.create(directory)


async def test_federated_hubs_carry_tasks_both_ways(tmp_path: Path, hubs: Any) -> None:
    one = await hubs("one", "two", "three")
    two = await hubs("two", "one")
    three = await hubs("three")  # names no one: it refuses hub one's link
    await eventually(lambda: one.state.federation.links[two.state.identity.aid].up,
                "hub one federated with hub two")
    await eventually(lambda: one.state.federation.links[three.state.identity.aid].state
                == "not-federated", "hub three refuses hub one")
    provider, back = Provider(), Provider()
    async with AsyncExitStack() as stack:
        bob = await start_node(stack, tmp_path / "bob", two.url, provider)
        alice = await start_node(stack, tmp_path / "alice", one.url, back)
        carol = await start_node(stack, tmp_path / "carol", three.url)

        # Lookups are answered from the home hub, and verify at alice's node.
        peer = await alice.hub.peer(bob.identity.aid)
        assert peer.aid == bob.identity.aid and peer.encryption_key
        assert peer.card is not None and peer.card["homeHub"] == two.url
        ids = await send_tasks(alice, bob, 5, "federated")
        await all_completed(alice, ids)
        assert sorted(provider.served) == sorted(ids) and set(provider.served.values()) == {1}
        assert alice.tasks.get(None, ids[0])["metadata"]["anet.receipt_verified"] is True
        # And back: bob asks alice, through hub two, then hub one.
        back_ids = await send_tasks(bob, alice, 3, "reverse")
        await all_completed(bob, back_ids)
        assert sorted(back.served) == sorted(back_ids)

        # Hub three did not name hub one: the refusal says which hub, and what would fix it.
        with pytest.raises(TaskError) as refused:
            await send_tasks(alice, carol, 1, "no way")
        assert refused.value.reason == "not-federated"
        assert three.state.identity.aid in refused.value.message
        assert f"--federate {one.state.identity.aid}@" in refused.value.message

        # Approval, reviews and the official list stay per hub: hub one has no bob.
        assert await one.state.storage.get_agent(bob.identity.aid) is None
        assert await one.state.storage.get_agent(two.state.identity.aid) is None

        # Hub two's operator stops federating: alice's next task (bob still in her cache)
        # fails at once, and its anet.reason says why.
        two_aid = two.state.identity.aid
        await hubs("two")
        await eventually(lambda: one.state.federation.links[two_aid].state
                    == "not-federated", "hub two refuses hub one now")
        [late] = await send_tasks(alice, bob, 1, "late")
        await eventually(lambda: alice.tasks.get(None, late)["status"]["state"]
                    == "TASK_STATE_FAILED", "the late task failed")
        assert alice.tasks.get(None, late)["metadata"]["anet.reason"] == "not_federated"


async def test_a_federated_hub_is_limited_and_may_only_look_up_and_send(
        tmp_path: Path, hubs: Any, raw: Any, nodes: Any) -> None:
    one = await hubs("one", "two", federation_limits=FederationLimits(0.01, 3))
    two = await hubs("two", "one")
    await eventually(lambda: one.state.federation.links[two.state.identity.aid].up, "federated")
    ws, challenge = await raw.open(one)
    frame = raw.register_frame(identity(tmp_path, "two"), challenge, one.url)
    answer = await raw.ask(ws, {**frame, "type": "federate"})
    assert answer["type"] == "registered" and answer["limits"]["burst"] == 3
    publish = await raw.ask(ws, {"type": "publish", "rid": "1", "card": {}})
    assert publish["reason"] == "not-allowed"
    lookup = await raw.ask(ws, {"type": "lookup", "rid": "2", "aid": "a" * 32})
    assert lookup["reason"] == "unknown-agent"  # homed here only: no second hop
    await raw.ask(ws, {"type": "lookup", "rid": "3", "aid": "a" * 32})
    limited = await raw.ask(ws, {"type": "lookup", "rid": "4", "aid": "a" * 32})
    assert limited["reason"] == "rate-limited" and "federated hub" in limited["message"]

    # A hub that is not named is refused, and a node cannot pass for one.
    stranger = nodes.identity("mallory")
    ws, challenge = await raw.open(two)
    frame = raw.register_frame(stranger, challenge, two.url)
    refused = await raw.ask(ws, {**frame, "type": "federate"})
    assert refused["reason"] == "not-federated" and stranger.aid in refused["message"]


async def test_a_federation_link_fails_over_between_the_other_hubs_instances(
        tmp_path: Path) -> None:
    """Hub one names hub two by the URLs of two instances (``AID@URL,URL``; the second an
    instance with the same identity), and hub two advertises a third (``--public-url``, signed
    in its challenge): the link comes up at the first, goes to the second once the first is
    gone, and to the third, which only hub two named, once the second is gone too; and to the
    third again after hub one restarted (it kept what hub two advertised)."""
    two, port, third_port = identity(tmp_path, "two"), free_port(), free_port()
    third_url = f"ws://localhost:{third_port}"  # another spelling of 127.0.0.1: another URL
    for copy in ("two-b", "two-c"):
        shutil.copytree(tmp_path / "two" / "identity", tmp_path / copy / "identity")
    names_one = (PeerHub(identity(tmp_path, "one").aid, f"ws://127.0.0.1:{port}"),)
    first, second = [await RunningHub(HubConfig(data_dir=tmp_path / name, federate=names_one,
                                                public_url=third_url)).start()
                     for name in ("two", "two-b")]
    third = await RunningHub(HubConfig(data_dir=tmp_path / "two-c", federate=names_one),
                             port=third_port).start()
    peer = PeerHub.parse(f"{two.aid}@{first.url},{second.url}")
    one = await RunningHub(HubConfig(data_dir=tmp_path / "one", federate=(peer,)),
                           port=port).start()
    try:
        link = one.state.federation.links[two.aid]
        await eventually(lambda: link.up and link.url == first.url, "linked to the first")
        assert link.urls == (first.url, second.url, third_url)
        await first.stop()
        await eventually(lambda: link.up and link.url == second.url, "linked to the second")
        await second.stop()
        await eventually(lambda: link.up and link.url == third_url, "linked to the third")
        _, info = await get_json(f"{one.http}/v1/hub")
        assert info["federation"][0]["urls"] == [first.url, second.url, third_url]

        # Hub one restarts with both named instances still down: it saved what hub two
        # advertised, and links to the third at once.
        await one.stop()
        one = await RunningHub(one.config, port=port).start()
        link = one.state.federation.links[two.aid]
        await eventually(lambda: link.up and link.url == third_url, "the third, after a restart")
    finally:
        for hub in (one, first, second, third):
            await hub.stop()


async def test_a_stopping_hub_closes_the_links_of_the_hubs_federated_with_it(
        tmp_path: Path, hubs: Any, caplog: pytest.LogCaptureFixture) -> None:
    """Its shutdown closes every WebSocket first, a federated hub's as well as a node's, with
    1001: nothing keeps it waiting, and the other hub hears why."""
    one = await hubs("one", "two")
    two = await hubs("two", "one")
    two_aid = two.state.identity.aid
    link = one.state.federation.links[two_aid]
    await eventually(lambda: link.up, "hub one federated with hub two")
    caplog.set_level("INFO", logger="anet_hub.federation")
    await two.stop()
    await eventually(lambda: f"event=federation-closed peer={two_aid} url={two.url} code=1001"
                     in caplog.text, "the link closed with 1001")


def test_federate_specs_are_checked() -> None:
    aid = "b" * 32
    assert PeerHub.parse(f"{aid}@ws://hub.example.org:8765/v1/ws") == PeerHub(
        aid, "ws://hub.example.org:8765")
    assert PeerHub.parse(f"{aid}@wss://a.example/,wss://b.example/v1/ws,wss://a.example") == \
        PeerHub(aid, "wss://a.example", ("wss://b.example",))
    assert PeerHub.parse(f"{aid}@https://Hub.example:1") == PeerHub(aid, "wss://hub.example:1")
    for bad in ("ws://hub:1", f"{aid}@ftp://hub:1", "nope@ws://hub:1",
                f"{aid}@ws://hub:1,", f"{aid}@ws://hub:1,ftp://other:2"):
        with pytest.raises(ValueError, match="AID@ws://HOST:PORT"):
            PeerHub.parse(bad)
    with pytest.raises(ValueError, match="positive"):
        replace(FederationLimits(), burst=0)
