"""``make bench`` stays runnable and prints every figure of the table of targets."""

from __future__ import annotations

import asyncio
import importlib
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from anet_core.demo.network import EmbeddedNetwork

RUN = Path(__file__).resolve().parents[2] / "bench" / "run.py"
PERFORMANCE = RUN.parents[1] / "docs" / "performance.md"


def bench_module(name: str) -> ModuleType:
    """A module of ``bench/``, which is scripts, not a package."""
    sys.path.insert(0, str(RUN.parent))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.remove(str(RUN.parent))


def test_bench_run_help() -> None:
    done = subprocess.run([sys.executable, str(RUN), "--help"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "--quick" in done.stdout


def test_documented_table_has_every_target() -> None:
    """The table of targets in docs/performance.md shows every figure bench/run.py prints."""
    run = bench_module("run")
    section = PERFORMANCE.read_text().split("## Targets", 1)[1].split("\n## ", 1)[0]
    missing = [target.figure for target in run.TARGETS if target.figure not in section]
    assert not missing, f"docs/performance.md, ## Targets, lacks {missing}"


async def test_the_relay_figure_delivers_every_envelope_through_a_real_hub(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``bench/relay.py``'s figure on a few envelopes: its two nodes, on a loop of their own in a
    thread (``ANET_LOOP`` chooses it, as for a daemon; asyncio here, so that the test needs no
    extra), send them through a real ``anet hub serve``; the rate is given only once every one
    was delivered (``relay_rate`` waits for the last)."""
    relay, run = bench_module("relay"), bench_module("run")
    monkeypatch.setenv("ANET_LOOP", "asyncio")
    async with EmbeddedNetwork.open(prefix="anet-bench-test-") as network:
        await network.start_hub("the hub", *run.HUB_OPTIONS)
        rate = await asyncio.to_thread(relay.node_loop_relay_rate, network.hub_url,
                                       tmp_path / "relay", 100, 8)
    assert rate > 0
