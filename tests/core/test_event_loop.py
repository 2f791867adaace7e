"""The daemons' event loop (anet_core/event_loop.py): uvloop when it is installed (the
``fast`` extra), asyncio's own when it is not or when chosen; ``ANET_LOOP`` chooses for a node,
``--loop`` for a hub."""

from __future__ import annotations

import sys

import pytest
import uvloop

from anet_core.errors import AnetError
from anet_core.event_loop import loop_factory
from anet_core.settings import Settings
from tests.support.processes import hub_and_nodes, without_uvloop

REFUSAL = AnetError("test-no-uvloop", "uvloop was asked for", hint="install the extra")


def test_auto_takes_uvloop_when_installed_and_asyncio_when_not(monkeypatch):
    assert loop_factory("auto", refusal=REFUSAL) is uvloop.new_event_loop
    assert loop_factory("uvloop", refusal=REFUSAL) is uvloop.new_event_loop
    assert loop_factory("asyncio", refusal=REFUSAL) is None
    monkeypatch.setitem(sys.modules, "uvloop", None)  # as if the fast extra were not installed
    assert loop_factory("auto", refusal=REFUSAL) is None
    with pytest.raises(AnetError) as refused:
        loop_factory("uvloop", refusal=REFUSAL)
    assert refused.value is REFUSAL
    with pytest.raises(ValueError, match="'trio' is not an event loop"):
        loop_factory("trio", refusal=REFUSAL)


def test_anet_loop_names_a_loop(monkeypatch):
    monkeypatch.setenv("ANET_LOOP", " UVLoop ")
    assert Settings().loop == "uvloop"
    monkeypatch.delenv("ANET_LOOP")
    assert Settings().loop == "auto"
    monkeypatch.setenv("ANET_LOOP", "trio")
    with pytest.raises(AnetError) as refused:
        Settings()
    assert refused.value.reason == "settings-invalid"
    assert "ANET_LOOP='trio'" in refused.value.message
    assert refused.value.hint == "use auto, uvloop or asyncio"


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_a_node_runs_on_the_loop_chosen(tmp_path, monkeypatch, loop):
    monkeypatch.setenv("ANET_LOOP", loop)
    with hub_and_nodes(tmp_path, "alice", "bob") as (_, (alice, bob)):
        alice.run("trust", "add", bob.aid)
        assert bob.aid in alice.run("trust", "list").stdout  # the control plane answers
    for node in (alice, bob):
        ready = [line for line in (node.root / "logs" / "anetd.log").read_text().splitlines()
                 if "event=node-ready" in line]
        assert ready and ready[-1].endswith(f"loop={loop}")


def test_a_node_refuses_anet_loop_uvloop_without_uvloop(tmp_path, data_dir, anet):
    hidden = without_uvloop(tmp_path)
    anet("init", check=True)
    started = anet("up", env=hidden | {"ANET_LOOP": "uvloop"})
    assert started.returncode != 0
    assert "daemon-no-uvloop" in started.stderr + started.stdout
    assert "anet[fast]" in started.stderr + started.stdout
    auto = anet("up", env=hidden | {"ANET_LOOP": "auto"}, check=True)
    try:
        assert auto.returncode == 0
        assert "loop=asyncio" in (data_dir / "logs" / "anetd.log").read_text()
    finally:
        anet("stop")
