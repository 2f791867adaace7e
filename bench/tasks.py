"""Benchmark: task round trips between two nodes through a hub on loopback.

Runs ``anet hub serve`` as its own process and two nodes in this process, each with its real
store, evidence chain, hub link and task layer. Node B serves every task with a test module
that completes it at once (the provider hook path); node A sends N tasks one after the other,
then N at once. A round trip is ``send`` until A holds the completed task with its verified
receipt: two sealed envelopes at least (task.message, then WORKING and COMPLETED updates).

    .venv/bin/python bench/tasks.py [--tasks 200]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

from anet_core import hookimpl
from anet_core.config import read_raw, write_config
from anet_core.datadir import initialise
from anet_core.link import JoinState
from anet_core.node import Node
from anet_core.plugins import make_plugins
from anet_core.records import InboundTask, TaskClaim
from anet_core.settings import Settings


class EchoModule:
    """Completes every task with its own text: the fastest possible provider."""

    @hookimpl
    def anet_take_task(self, node: Node, task: InboundTask) -> TaskClaim:
        async def serve(task: InboundTask, responder: Any) -> None:
            await responder.complete(artifacts=[task.message["parts"][0]["text"]])

        return TaskClaim(module="bench-echo", serve=serve)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


async def open_node(stack: AsyncExitStack, root: Path, hub_url: str, *, echo: bool) -> Node:
    """A node as the daemon opens it (``Node.open``), without its modules' listeners."""
    settings = Settings(data_dir=root)
    initialise(settings.paths)
    raw = read_raw(settings.paths.config)
    raw["hub"] = {"url": hub_url}
    write_config(settings.paths.config, raw)
    plugins = make_plugins(load_entry_points=False)
    if echo:
        plugins.pm.register(EchoModule(), name="bench-echo")
    node = await stack.enter_async_context(Node.open(settings, plugins=plugins))
    node.tasks.receive()  # the daemon does this once its modules run
    for _ in range(400):
        if node.hub.status.state is JoinState.REGISTERED:
            return node
        await asyncio.sleep(0.05)
    raise RuntimeError(f"node did not register: {node.hub.status.sentence}")


async def round_trip(a: Node, b_aid: str, n: int) -> float:
    started = time.perf_counter()
    message = {"messageId": f"m-{n}", "role": "ROLE_USER", "parts": [{"text": f"task {n}"}]}
    task = await a.tasks.send(b_aid, message)
    async for event in a.tasks.subscribe(b_aid, task["id"]):
        last = event
    # A task that completed before the subscription attached has its snapshot as only event.
    final = last["statusUpdate"] if "statusUpdate" in last else last["task"]
    assert final["status"]["state"] == "TASK_STATE_COMPLETED", last
    assert final["metadata"]["anet.receipt_verified"] is True
    return time.perf_counter() - started


def report(label: str, latencies: list[float], wall: float) -> None:
    ordered = sorted(latencies)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    print(f"{label:<11} n={len(latencies):<5} p50={statistics.median(ordered) * 1000:7.1f} ms  "
          f"p99={p99 * 1000:7.1f} ms  {len(latencies) / wall:7.1f} tasks/s")


async def main(tasks: int) -> None:
    with tempfile.TemporaryDirectory(prefix="anet-bench-") as tmp:
        root = Path(tmp)
        port = free_port()
        hub = subprocess.Popen(
            [sys.executable, "-m", "anet_core.cli.main", "hub", "serve", "--listen",
             f"127.0.0.1:{port}", "--data", str(root / "hub"), "--rate", "100000",
             "--burst", "100000"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            start_new_session=True)
        try:
            await asyncio.sleep(1.0)
            async with AsyncExitStack() as stack:
                url = f"ws://127.0.0.1:{port}"
                a = await open_node(stack, root / "a", url, echo=False)
                b = await open_node(stack, root / "b", url, echo=True)
                b.tasks.trust(a.aid)
                await round_trip(a, b.aid, -1)  # warm up: directory lookups, connections

                started = time.perf_counter()
                sequential = [await round_trip(a, b.aid, n) for n in range(tasks)]
                report("sequential", sequential, time.perf_counter() - started)

                started = time.perf_counter()
                concurrent = await asyncio.gather(*[round_trip(a, b.aid, tasks + n)
                                                    for n in range(tasks)])
                report("concurrent", list(concurrent), time.perf_counter() - started)
        finally:
            os.killpg(hub.pid, signal.SIGTERM)
            hub.wait(10)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=200, help="tasks per phase")
    asyncio.run(main(parser.parse_args().tasks))
