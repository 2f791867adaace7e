"""Benchmark: how soon a node and its hub notice each other gone, and how soon a node fails over
(docs/hub.md, "Measured"; docs/protocol.md, "Heartbeats"), with the default timers.

Runs two ``anet hub serve`` processes that are instances of one hub (the second has a copy of
the first's operator key), a node in this process joined with both URLs (``hub.instances``),
and a second node in a process of its own. It measures:

  failover:          the first instance SIGKILLed -> the node registered at the second;
  frozen node:       the second node SIGSTOPped -> offline in the hub's directory;
  frozen hub:        the second instance SIGSTOPped -> the node's link left it.

    .venv/bin/python bench/hub_availability.py        # about a minute: the timers are real

``make bench`` (bench/run.py) measures the same, with its other figures.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import aiohttp

from anet_core.identity import Identity
from anet_core.link import JoinState
from anet_core.link.client import HubClient

LIMIT_S = 120.0
NODE = """
import asyncio, sys
from pathlib import Path
from anet_core.identity import Identity
from anet_core.link.client import HubClient

async def main():
    client = HubClient(Identity.load(Path(sys.argv[1])), url=sys.argv[2],
                       pin_path=Path(sys.argv[1]).parent / "pin.json")
    await client.start()
    await asyncio.Event().wait()

asyncio.run(main())
"""


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def hub(data: Path, port: int) -> asyncio.subprocess.Process:
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "anet_core.cli.main", "hub", "serve", "--listen",
        f"127.0.0.1:{port}", "--data", str(data), env={**os.environ, "ANET_LOG_LEVEL": "WARNING"},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    await until(lambda: _listening(port), "the hub listens")
    return process


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


async def until(condition: Callable[[], object], what: str) -> float:
    """Seconds until ``condition`` (a function or coroutine function) holds."""
    started = time.monotonic()
    while time.monotonic() - started < LIMIT_S:
        value = condition()
        if asyncio.iscoroutine(value):
            value = await value
        if value:
            return time.monotonic() - started
        await asyncio.sleep(0.05)
    raise RuntimeError(f"not within {LIMIT_S:g} s: {what}")


async def online(port: int, aid: str) -> bool:
    """``aid`` is registered at the hub on ``port`` and connected (not yet registered: no)."""
    async with aiohttp.ClientSession() as http, \
            http.get(f"http://127.0.0.1:{port}/v1/agents/{aid}") as answer:
        return answer.status == 200 and bool(json.loads(await answer.text())["entry"]["online"])


@dataclass(frozen=True)
class Availability:
    failover_s: float
    """The first instance SIGKILLed -> the node registered at the second."""
    frozen_node_s: float
    """The second node SIGSTOPped -> offline in the hub's directory."""
    frozen_hub_s: float
    """The second instance SIGSTOPped -> the node's link left it."""

    def lines(self) -> list[str]:
        return [f"failover: the first instance SIGKILLed -> registered at the second in "
                f"{self.failover_s:.2f} s",
                f"frozen node: SIGSTOP -> offline at its hub in {self.frozen_node_s:.1f} s "
                f"(hub --heartbeat 15s: at most 25 s)",
                f"frozen hub: SIGSTOP -> the node's link left it in {self.frozen_hub_s:.1f} s "
                f"(hub.heartbeat 10s: at most 16 s)"]


async def measure(work: Path) -> Availability:
    first_port, second_port = free_port(), free_port()
    first = await hub(work / "one", first_port)
    shutil.copytree(work / "one" / "identity", work / "two" / "identity")
    second = await hub(work / "two", second_port)
    urls = [f"ws://127.0.0.1:{first_port}", f"ws://127.0.0.1:{second_port}"]
    alice = HubClient(Identity.create(work / "alice" / "identity"), url=urls[0],
                      pin_path=work / "alice" / "pin.json", instances=urls[1:])
    bob_identity = Identity.create(work / "bob" / "identity")
    bob = await asyncio.create_subprocess_exec(
        sys.executable, "-c", NODE, str(work / "bob" / "identity"), urls[1])
    try:
        await alice.start()
        await until(lambda: alice.status.state is JoinState.REGISTERED, "alice registered")
        await until(lambda: online(second_port, bob_identity.aid), "bob online")

        first.kill()
        failover = await until(lambda: alice.status.state is JoinState.REGISTERED
                               and alice.status.hub_url == urls[1], "alice at the second")
        bob.send_signal(signal.SIGSTOP)
        frozen_node = await until(lambda: _not(online(second_port, bob_identity.aid)),
                                  "bob offline")
        second.send_signal(signal.SIGSTOP)
        frozen_hub = await until(lambda: alice.status.state is not JoinState.REGISTERED,
                                 "alice left the frozen instance")
        return Availability(failover, frozen_node, frozen_hub)
    finally:
        await alice.close()
        for process in (bob, second, first):
            if process.returncode is None:
                process.send_signal(signal.SIGCONT)
                process.kill()
                await process.wait()


async def _not(value: object) -> bool:
    return not await value  # type: ignore[misc]


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="anet-bench-") as directory:
        print("\n".join(asyncio.run(measure(Path(directory))).lines()))


if __name__ == "__main__":
    main()
