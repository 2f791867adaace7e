"""Benchmark: one hub on loopback, N registered nodes connected to it, and relay throughput.

Runs ``anet hub serve`` as its own process (so its memory is measured alone) and N real hub
clients in this process. Prints the hub's RSS before and after the nodes connected, per node,
the latency of directory reads with everyone connected, and envelopes/s relayed between two
nodes (``bench/relay.py``; one send in flight, then 32).

    .venv/bin/python bench/hub_connections.py [--nodes 1000] [--envelopes 2000]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import statistics
import sys
import tempfile
import time
from pathlib import Path

import aiohttp
from relay import Pair, relay_rate, until

from anet_core.identity import Identity
from anet_core.link import JoinState, SearchQuery
from anet_core.link.client import HubClient

CONNECT_BATCH = 50


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise RuntimeError("no VmRSS")


async def wait_healthy(url: str) -> None:
    async with aiohttp.ClientSession() as session:
        for _ in range(300):
            try:
                async with session.get(url + "/v1/health") as response:
                    if response.status == 200:
                        return
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    raise RuntimeError("the hub did not start")


async def run(nodes: int, envelopes: int, work: Path) -> None:
    port = free_port()
    url = f"ws://127.0.0.1:{port}"
    hub = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "anet_core.cli.main", "hub", "serve", "--listen",
        f"127.0.0.1:{port}", "--data", str(work / "hub"), "--rate", "1000000", "--burst",
        "1000000", env={**os.environ, "ANET_LOG_LEVEL": "WARNING"},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    clients: list[HubClient] = []
    try:
        await wait_healthy(f"http://127.0.0.1:{port}")
        await asyncio.sleep(0.5)
        before = rss_kib(hub.pid)
        started = time.perf_counter()
        identities = [Identity.create(work / f"n{index}" / "identity") for index in range(nodes)]
        print(f"made {nodes} identities in {time.perf_counter() - started:.1f} s")

        started = time.perf_counter()
        for first in range(0, nodes, CONNECT_BATCH):
            batch = [HubClient(identity, url=url, pin_path=work / f"n{first + i}" / "pin.json")
                     for i, identity in enumerate(identities[first:first + CONNECT_BATCH])]
            clients += batch
            await asyncio.gather(*(client.start() for client in batch))
        await until(lambda: all(c.status.state is JoinState.REGISTERED for c in clients),
                    f"{nodes} nodes to register")
        connect_s = time.perf_counter() - started
        await asyncio.sleep(1.0)
        after = rss_kib(hub.pid)
        print(f"connected and registered {nodes} nodes in {connect_s:.1f} s "
              f"({nodes / connect_s:.0f} registrations/s)")
        print(f"hub RSS before: {before / 1024:.1f} MiB, with {nodes} nodes: "
              f"{after / 1024:.1f} MiB, per connected node: {(after - before) / nodes:.1f} KiB")

        reader = clients[0]
        latencies = []
        for index in range(200):
            t0 = time.perf_counter()
            await reader.peer(identities[(index * 7) % nodes].aid)
            latencies.append((time.perf_counter() - t0) * 1000)
        t0 = time.perf_counter()
        await reader.search(SearchQuery(limit=100))
        search_ms = (time.perf_counter() - t0) * 1000
        latencies.sort()
        p99 = latencies[int(len(latencies) * .99)]
        print(f"responsiveness with {nodes} connected: lookup p50 "
              f"{statistics.median(latencies):.2f} ms, p99 {p99:.2f} ms; "
              f"search (limit 100) {search_ms:.1f} ms")

        pair = Pair(clients[1], identities[1], clients[2], identities[2])
        sequential = await relay_rate(pair, envelopes, in_flight=1)
        pipelined = await relay_rate(pair, envelopes, in_flight=32)
        print(f"relay A→B, {envelopes} envelopes of ~0.6 KiB each, delivered and acknowledged: "
              f"sequential {sequential:.0f} envelopes/s, 32 in flight {pipelined:.0f} envelopes/s")
        print(f"hub RSS at the end: {rss_kib(hub.pid) / 1024:.1f} MiB")
    finally:
        for first in range(0, len(clients), CONNECT_BATCH):
            batch = clients[first:first + CONNECT_BATCH]
            await asyncio.gather(*(client.close() for client in batch))
        hub.send_signal(signal.SIGTERM)
        await asyncio.wait_for(hub.wait(), 30)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=1000)
    parser.add_argument("--envelopes", type=int, default=2000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="anet-bench-") as work:
        asyncio.run(run(args.nodes, args.envelopes, Path(work)))


if __name__ == "__main__":
    main()
