"""Heartbeats on the node's link to its hub (docs/protocol.md, "Heartbeats"): a node frozen with
SIGSTOP is offline at its hub a heartbeat and a half later, with ``lastSeen`` the last frame it
sent; a hub frozen with SIGSTOP is left by its nodes as soon, and an instance frozen so by its
nodes and by a federated hub, which go to another instance. TCP cannot tell either: the
kernel of a stopped process still answers its keepalives. Real processes: ``anet hub serve``
and daemons started with ``anet up``, driven through the CLI."""

from __future__ import annotations

import json
import os
import shutil
import signal
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from anet_core.daemon import running_pid
from anet_core.identity import Identity
from anet_core.settings import DataPaths
from tests.support.processes import HubProcess, NodeDir, free_port
from tests.support.waiting import STEP_TIMEOUT_S, wait_for

pytestmark = pytest.mark.timeout(120)

HUB_HEARTBEAT_S = 4.0
DETECTED_S = 60.0
"""How long the tests wait for what a heartbeat and a half brings: generous, on 2 busy cores."""


@contextmanager
def network(root: Path, *, node_heartbeat: str) -> Iterator[tuple[HubProcess, NodeDir, NodeDir]]:
    """A hub that pings after ``HUB_HEARTBEAT_S`` of silence, and alice and bob registered at
    it, pinging theirs after ``node_heartbeat``."""
    hub = HubProcess(root / "hub", free_port(),
                     options=("--heartbeat", f"{HUB_HEARTBEAT_S:g}s")).start()
    nodes = [NodeDir(root / name, disabled="a2a,mcp") for name in ("alice", "bob")]
    try:
        for node in nodes:
            node.run("init")
            config = json.loads((node.root / "config.json").read_text())
            config["node"] = {"name": node.root.name}
            (node.root / "config.json").write_text(json.dumps(config))
            node.run("join", hub.url)
            config = json.loads((node.root / "config.json").read_text())
            config["hub"]["heartbeat"] = node_heartbeat
            (node.root / "config.json").write_text(json.dumps(config))
            node.run("up")
            node.wait_registered()
        yield hub, nodes[0], nodes[1]
    finally:
        for node in nodes:
            pid = running_pid(DataPaths(node.root))
            if pid is not None:
                os.kill(pid, signal.SIGCONT)
            node.stop()
        if hub.process is not None:
            hub.process.send_signal(signal.SIGCONT)
        hub.stop()


def entry_of(hub: HubProcess, aid: str) -> dict[str, Any]:
    """``aid``'s entry in the hub's directory (``GET /v1/agents/<aid>``)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{hub.port}/v1/agents/{aid}",
                                timeout=STEP_TIMEOUT_S) as answer:
        return dict(json.load(answer)["entry"])


def test_a_frozen_node_is_offline_at_its_hub_with_its_last_frame_as_last_seen(
        tmp_path: Path) -> None:
    # bob pings only after a minute of silence: the hub's heartbeat is what finds him frozen.
    with network(tmp_path, node_heartbeat="60s") as (hub, _, bob):
        bob_aid, pid = bob.aid, running_pid(DataPaths(bob.root))
        assert pid is not None and entry_of(hub, bob_aid)["online"] is True
        os.kill(pid, signal.SIGSTOP)
        stopped_at = time.time()
        gone = wait_for(lambda: (entry := entry_of(hub, bob_aid))["online"] is False and entry,
                        "bob offline at the hub", DETECTED_S)
        # His last frame (a pong to the hub's ping) came before the stop; the hub noticed
        # only a heartbeat and a half later, and says when it last heard him, not when it
        # gave up.
        assert gone["lastSeen"] < stopped_at + 1.0, (gone["lastSeen"], stopped_at)
        os.kill(pid, signal.SIGCONT)
        bob.wait_registered()
        wait_for(lambda: entry_of(hub, bob_aid)["online"] is True, "bob back online",
                 DETECTED_S)


def test_a_frozen_hub_is_left_by_its_nodes_and_found_again(tmp_path: Path) -> None:
    with network(tmp_path, node_heartbeat="2s") as (hub, alice, _):
        assert hub.process is not None
        hub.process.send_signal(signal.SIGSTOP)
        wait_for(lambda: alice.status()["hub"]["state"] == "unreachable",
                 "alice left the frozen hub", DETECTED_S)
        hub.process.send_signal(signal.SIGCONT)
        alice.wait_registered()


def test_a_frozen_instance_is_left_by_its_nodes_and_by_a_federated_hub(tmp_path: Path) -> None:
    """Hub two runs as two instances (one identity); alice knows both, and hub one federates
    with both. The instance both use is frozen with SIGSTOP: alice registers at the other, and
    hub one's link moves there, each after its own heartbeat went unanswered."""
    one_id = Identity.create(tmp_path / "one" / "identity")
    two_id = Identity.create(tmp_path / "two-a" / "identity")
    shutil.copytree(tmp_path / "two-a" / "identity", tmp_path / "two-b" / "identity")
    one_port, a_port, b_port = free_port(), free_port(), free_port()
    two_urls = [f"ws://127.0.0.1:{a_port}", f"ws://127.0.0.1:{b_port}"]
    heartbeat = ("--heartbeat", f"{HUB_HEARTBEAT_S:g}s")
    two = [HubProcess(tmp_path / name, port, options=(
        *heartbeat, "--federate", f"{one_id.aid}@ws://127.0.0.1:{one_port}")).start()
        for name, port in (("two-a", a_port), ("two-b", b_port))]
    one = HubProcess(tmp_path / "one", one_port, options=(
        *heartbeat, "--federate", f"{two_id.aid}@{','.join(two_urls)}")).start()
    alice = NodeDir(tmp_path / "alice", disabled="a2a,mcp")
    try:
        alice.run("init")
        alice.run("join", *two_urls)
        config = json.loads((alice.root / "config.json").read_text())
        config["hub"]["heartbeat"] = "2s"
        (alice.root / "config.json").write_text(json.dumps(config))
        alice.run("up")
        alice.wait_registered()
        wait_for(lambda: federation_of(one) == (two_urls[0], "up"), "one linked to two-a")
        assert alice.status()["hub"]["hubUrl"] == two_urls[0]

        assert two[0].process is not None
        two[0].process.send_signal(signal.SIGSTOP)
        wait_for(lambda: federation_of(one) == (two_urls[1], "up"),
                 "hub one's link moved to two-b", DETECTED_S)
        wait_for(lambda: alice.status()["hub"]["state"] == "registered"
                 and alice.status()["hub"]["hubUrl"] == two_urls[1],
                 "alice registered at two-b", DETECTED_S)
    finally:
        alice.stop()
        for hub in (*two, one):
            if hub.process is not None:
                hub.process.send_signal(signal.SIGCONT)
            hub.stop()


def federation_of(hub: HubProcess) -> tuple[str, str]:
    """The URL and state of ``hub``'s one federation link (``GET /v1/hub``)."""
    with urllib.request.urlopen(f"http://127.0.0.1:{hub.port}/v1/hub",
                                timeout=STEP_TIMEOUT_S) as answer:
        [link] = json.load(answer)["federation"]
    return link["url"], link["state"]
