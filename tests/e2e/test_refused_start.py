"""A start the configuration refuses ends before the node registers at its hub; output piped to
a reader that stops early ends quietly."""

from __future__ import annotations

import os
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from tests.support.processes import ANET, REPO, HubProcess, NodeDir, free_port

pytestmark = pytest.mark.timeout(120)


def hub_knows(hub: HubProcess, aid: str) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{hub.port}/v1/agents/{aid}", timeout=10):
            return True
    except urllib.error.HTTPError as error:
        assert error.code == 404
        return False


def test_a_policy_conflict_refuses_the_start_before_the_hub_sees_the_node(
        tmp_path: Path) -> None:
    hub = HubProcess(tmp_path / "hub", free_port()).start()
    node = NodeDir(tmp_path / "node", disabled="a2a")
    try:
        node.run("init")
        node.run("up")
        node.run("policy", "set", "open")
        aid = node.aid
        node.run("stop")
        node.configure(backends={"backends": [{
            "match": "*", "url": "unix:///run/anet-test-absent.sock", "accept_untrusted": True,
            "toolless": True}]})
        node.run("join", hub.url)
        refused = node.run("up", check=False)
        assert refused.returncode != 0
        assert "accept_untrusted" in refused.stdout + refused.stderr
        assert not hub_knows(hub, aid)
    finally:
        node.stop()
        hub.stop()


def test_piped_output_that_is_cut_short_ends_quietly(tmp_path: Path) -> None:
    env = {**os.environ, "ANET_DATA_DIR": str(tmp_path / "node")}
    subprocess.run([*ANET, "init"], env=env, cwd=REPO, check=True, capture_output=True,
                   timeout=60)
    for args in (["doctor", "--json"], ["--help"], ["status"], ["tasks"]):
        read_end, write_end = os.pipe()
        os.close(read_end)  # the reader is gone before the first line (`anet ... | head -0`)
        try:
            writer = subprocess.run([*ANET, *args], env=env, cwd=REPO, stdout=write_end,
                                    stderr=subprocess.PIPE, text=True, timeout=60)
        finally:
            os.close(write_end)
        assert "Traceback" not in writer.stderr and "BrokenPipe" not in writer.stderr, (
            args, writer.stderr)
