"""Benchmark, end to end: what the network costs over calling a backend directly.

Starts the network of ``anet demo`` on loopback in a temporary directory (a hub, the nodes alice
and bob as real daemons, the example text agent as bob's backend on a unix socket) and drives it
with the official a2a-sdk client, blocking SendMessage over JSON-RPC, in two ways:

  (a) direct: the client calls the text agent on its socket;
  (b) network: the client calls bob's proxy card on alice's local A2A endpoint, and the task
      goes alice -> hub -> bob -> text agent and back, with a signed receipt.

For N tasks one after the other and N at once, in R rounds (each with clients of its own; the
latencies of all rounds pooled), it prints p50/p99 latency and tasks/s of both side by side, and
the ratio (b)/(a); the CPU time alice, the hub and bob spent on the sequential (b) tasks, and
the system calls and sleeps they made (the mean of the rounds); the idle memory (RSS) of a node
and of the hub; the wall time of ``anet status`` and ``anet --help`` with the daemon running;
the hub's relay rate between two nodes (bench/relay.py, the median of one run per round); and
the hub's memory per connected node (N nodes registered at a second hub, as
bench/hub_connections.py does); and how soon a node fails over to the next instance of its hub,
and how soon a frozen node and a frozen hub are noticed (bench/hub_availability.py, on the
heartbeats' real timers). It ends with the table of targets of docs/performance.md, each
figure with its targets and a mark. Everything is bounded in count and time and stopped and
removed at the end.

    .venv/bin/python bench/run.py [--tasks 100] [--rounds 3] [--nodes 1000] [--envelopes 5000]
                                  [--quick]
    .venv/bin/python bench/run.py --quick     # without the hub relay, the 1,000 nodes and
                                              # the hub availability
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import re
import shutil
import statistics
import sys
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest, TaskState
from hub_availability import measure as measure_availability
from relay import node_loop_relay_rate, until

from anet_core.demo.network import DemoNode, EmbeddedNetwork
from anet_core.demo.progress import Progress
from anet_core.identity import Identity
from anet_core.link import JoinState
from anet_core.link.client import HubClient

TEXT = ("stats: Hubs relay envelopes that are sealed end to end. Every remote agent appears on "
        "your machine as an A2A server on loopback. A node hands accepted tasks to a backend.")
WARM_UP = 5
CONNECT_BATCH = 50
SETTLE_S = 1.0
CALL_TIMEOUT_S = 60.0
# The hub's per-node rate limit (50/s, burst 200 by default) would measure itself, not the relay.
HUB_OPTIONS = ("--rate", "1000000", "--burst", "1000000")
CLI_RUNS = 5
RELAY_IN_FLIGHT = 32
FULL_NODES = 1000
PROBE_STEPS = 300_000


# --- the targets ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Target:
    """One figure of the table of targets (docs/performance.md) and how it is printed."""

    figure: str
    unit: str
    must: float
    aim: float
    higher_is_better: bool = False

    def meets(self, value: float, bound: float) -> bool:
        return value >= bound if self.higher_is_better else value <= bound

    def mark(self, value: float | None) -> str:
        if value is None:
            return "skipped"
        if self.meets(value, self.aim):
            return "meets aim"
        return "meets must" if self.meets(value, self.must) else "misses"

    def show(self, value: float) -> str:
        text = {"x": f"{value:.2f}", "ms": f"{value:.1f}", "/s": f"{value:,.0f}",
                "MiB": f"{value:.1f}", "KiB": f"{value:.1f}", "s": f"{value:.2f}"}[self.unit]
        return f"{text}{self.unit}" if self.unit == "x" else f"{text} {self.unit}"

    def bound(self, value: float) -> str:
        return f"{'≥' if self.higher_is_better else '≤'} {self.show(value)}"


TARGETS = (
    Target("(b)/(a) sequential p50", "x", 2.5, 2.0),
    Target("(b)/(a) sequential p99", "x", 3.0, 2.5),
    Target("(b)/(a) throughput, 100 at once", "x", 0.6, 0.8, higher_is_better=True),
    Target("CPU per task, alice + hub + bob", "ms", 6.0, 4.0),
    Target("hub relay, two nodes, delivered and acknowledged", "/s", 15_000, 25_000,
           higher_is_better=True),
    Target("idle RSS, node", "MiB", 45, 40),
    Target("idle RSS, hub", "MiB", 45, 40),
    Target(f"hub memory per connected node ({FULL_NODES:,} nodes)", "KiB", 16, 12),
    Target("`anet status` wall time (daemon running)", "s", 0.3, 0.15),
    Target("`anet --help` wall time (daemon running)", "s", 0.3, 0.15),
    Target("failover: node's instance SIGKILLed -> registered at the next", "s", 5.0, 1.0),
    Target("frozen node (SIGSTOP) seen offline by its hub", "s", 30, 25),
    Target("frozen hub instance (SIGSTOP) left by its node", "s", 30, 16),
)


@dataclass
class Phase:
    latencies: list[float]
    wall: float

    @classmethod
    def pooled(cls, phases: list[Phase]) -> Phase:
        """The rounds of one phase as one: every latency, and the time they all took."""
        return cls([latency for phase in phases for latency in phase.latencies],
                   sum(phase.wall for phase in phases))

    def percentile(self, fraction: float) -> float:
        ordered = sorted(self.latencies)
        return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.latencies) * 1000

    @property
    def p99_ms(self) -> float:
        return self.percentile(0.99) * 1000

    @property
    def per_second(self) -> float:
        return len(self.latencies) / self.wall


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for pid {pid}")


def cpu_s(pid: int) -> float:
    """User plus system CPU time of ``pid`` so far, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class Work:
    """What a process did: its CPU time, and counts that move far less with the host's speed
    than times do, so that two runs on a shared machine compare by them."""

    cpu_ms: float
    reads: float
    """System calls that read (a socket, a file): ``syscr`` of ``/proc/<pid>/io``."""
    writes: float
    """System calls that write (a socket, a file, each page the store's WAL is given)."""
    sleeps: float
    """Voluntary context switches: each time it waited (for a socket, the disk, a lock), so
    each time it came back to cold caches."""

    def __sub__(self, other: Work) -> Work:
        return Work(self.cpu_ms - other.cpu_ms, self.reads - other.reads,
                    self.writes - other.writes, self.sleeps - other.sleeps)

    def per(self, count: int) -> Work:
        return Work(self.cpu_ms / count, self.reads / count, self.writes / count,
                    self.sleeps / count)

    @staticmethod
    def mean(works: list[Work]) -> Work:
        return Work(*(statistics.fmean(getattr(work, name) for work in works)
                      for name in ("cpu_ms", "reads", "writes", "sleeps")))


def work(pid: int) -> Work:
    io = dict(line.split(":") for line in Path(f"/proc/{pid}/io").read_text().splitlines())
    sleeps = next(line.split()[1] for line in Path(f"/proc/{pid}/status").read_text().splitlines()
                  if line.startswith("voluntary_ctxt_switches:"))
    return Work(cpu_s(pid) * 1000, int(io["syscr"]), int(io["syscw"]), int(sleeps))


def machine() -> str:
    cpu = next((line.split(":", 1)[1].strip() for line in
                Path("/proc/cpuinfo").read_text().splitlines()
                if line.startswith("model name")), platform.processor() or "unknown CPU")
    mem_kib = next(int(line.split()[1]) for line in Path("/proc/meminfo").read_text().splitlines()
                   if line.startswith("MemTotal:"))
    return (f"{os.cpu_count()} CPUs ({cpu}), {mem_kib / 1024 / 1024:.1f} GiB memory, "
            f"Python {platform.python_version()}, {platform.system()} {platform.release()}")


def hub_loop(network: EmbeddedNetwork) -> str:
    """The hub's event loop, as its start-up line names it (uvloop with ``anet-hub[fast]``)."""
    found = re.search(r"event=listening .*loop=(\w+)", (network.work / "hub.log").read_text())
    return found.group(1) if found else "an unnamed loop"


def host_probe_ms() -> float:
    """How long a fixed pure-Python loop takes now (the median of five): on a shared machine the
    host's speed moves by a factor of two within hours, and this tells a reader how fast it was
    during a run (lower is faster), so that runs can be compared."""
    times = []
    for _ in range(5):
        started = time.perf_counter()
        total = 0
        for step in range(PROBE_STEPS):
            total += step * step % 7
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


# --- the two clients -----------------------------------------------------------------------------


@asynccontextmanager
async def sdk_client(http: httpx.AsyncClient, url: str) -> AsyncIterator[Client]:
    """The official client from the agent's card at ``url``: JSON-RPC, blocking calls."""
    config = ClientConfig(httpx_client=http, streaming=False,
                          supported_protocol_bindings=["JSONRPC"])
    client = await ClientFactory(config).create_from_url(url)
    try:
        yield client
    finally:
        await client.close()


def direct_http(network: EmbeddedNetwork, tasks: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=httpx.AsyncHTTPTransport(uds=str(network.agent_socket),
                                           limits=httpx.Limits(max_connections=tasks)),
        headers=network.agent_headers(), timeout=CALL_TIMEOUT_S)


def endpoint_http(alice: DemoNode, tasks: int) -> httpx.AsyncClient:
    return httpx.AsyncClient(headers={"Authorization": f"Bearer {alice.a2a_token()}"},
                             limits=httpx.Limits(max_connections=tasks), timeout=CALL_TIMEOUT_S)


async def one_task(client: Client) -> float:
    message = Message(role=Role.ROLE_USER, message_id=uuid.uuid4().hex, parts=[Part(text=TEXT)])
    started = time.perf_counter()
    last = None
    async for event in client.send_message(SendMessageRequest(message=message)):
        last = event
    elapsed = time.perf_counter() - started
    if last is None or last.WhichOneof("payload") != "task" or \
            last.task.status.state != TaskState.TASK_STATE_COMPLETED:
        raise RuntimeError(f"the task did not complete: {last}")
    return elapsed


async def sequential(client: Client, count: int) -> Phase:
    started = time.perf_counter()
    latencies = [await one_task(client) for _ in range(count)]
    return Phase(latencies, time.perf_counter() - started)


async def concurrent(client: Client, count: int) -> Phase:
    started = time.perf_counter()
    latencies = await asyncio.gather(*(one_task(client) for _ in range(count)))
    return Phase(list(latencies), time.perf_counter() - started)


# --- reporting -----------------------------------------------------------------------------------


def table(results: dict[str, tuple[Phase, Phase]], tasks: int) -> str:
    rows = [f"{'':<26}{'(a) direct':>13}{'(b) network':>14}{'(b)/(a)':>10}"]
    for name, (direct, network) in results.items():
        label = f"{name}, n={tasks}"
        for metric, unit, a, b in (("p50", "ms", direct.p50_ms, network.p50_ms),
                                   ("p99", "ms", direct.p99_ms, network.p99_ms),
                                   ("tasks/s", "/s", direct.per_second, network.per_second)):
            rows.append(f"{label:<18}{metric:<8}{a:>10.1f} {unit}{b:>11.1f} {unit}"
                        f"{b / a:>9.2f}x")
            label = ""
    return "\n".join(rows)


def target_table(figures: dict[str, float | None], notes: dict[str, str]) -> str:
    """Every figure of TARGETS, measured or skipped, with its targets and its mark."""
    width = max(len(target.figure) for target in TARGETS)
    rows = [f"{'figure':<{width}}  {'measured':>12}  {'must':>12}  {'aim':>12}  mark"]
    for target in TARGETS:
        value = figures.get(target.figure)
        note = f" ({notes[target.figure]})" if target.figure in notes else ""
        shown = "-" if value is None else target.show(value)
        rows.append(f"{target.figure:<{width}}  {shown:>12}"
                    f"  {target.bound(target.must):>12}  {target.bound(target.aim):>12}"
                    f"  {target.mark(value)}{note}")
    return "\n".join(rows)


# --- the CLI and the relay -----------------------------------------------------------------------


def anet_command() -> list[str]:
    """The ``anet`` a user runs: the console script beside this interpreter, else the module."""
    script = Path(sys.executable).parent / "anet"
    found = str(script) if script.exists() else shutil.which("anet")
    return [found] if found else [sys.executable, "-m", "anet_core.cli.main"]


async def cli_wall_s(node: DemoNode, network: EmbeddedNetwork, *args: str) -> float:
    """Median wall time of ``anet <args>`` run as a subprocess against ``node``'s data dir."""
    env = network.env(ANET_DATA_DIR=str(node.paths.root))
    times = []
    for _ in range(CLI_RUNS):
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(
            *anet_command(), *args, env=env, stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.PIPE)
        _, stderr = await asyncio.wait_for(process.communicate(), CALL_TIMEOUT_S)
        times.append(time.perf_counter() - started)
        if process.returncode != 0:
            raise RuntimeError(f"anet {' '.join(args)} exited with {process.returncode}: "
                               f"{stderr.decode(errors='replace')}")
    return statistics.median(times)


# --- the hub's memory per node -------------------------------------------------------------------


async def hub_per_node(network: EmbeddedNetwork, nodes: int, progress: Progress) -> float:
    """KiB of the hub's RSS per connected node, ``nodes`` registered at a hub of their own."""
    async with progress.step(f"{nodes} nodes registered at a second hub") as step:
        url = await network.start_hub("the counting hub", *HUB_OPTIONS)
        hub = network.child("the counting hub")
        await asyncio.sleep(SETTLE_S)
        before = rss_mib(hub.pid)
        work = network.work / "counted"
        identities = [Identity.create(work / f"n{index}" / "identity") for index in range(nodes)]
        clients: list[HubClient] = []
        try:
            for first in range(0, nodes, CONNECT_BATCH):
                batch = [HubClient(identity, url=url,
                                   pin_path=work / f"n{first + index}" / "pin.json")
                         for index, identity in enumerate(identities[first:first + CONNECT_BATCH])]
                clients += batch
                await asyncio.gather(*(client.start() for client in batch))
            await until(lambda: all(c.status.state is JoinState.REGISTERED for c in clients),
                        f"{nodes} nodes to register")
            await asyncio.sleep(SETTLE_S)
            after = rss_mib(hub.pid)
        finally:
            for first in range(0, len(clients), CONNECT_BATCH):
                await asyncio.gather(*(c.close() for c in clients[first:first + CONNECT_BATCH]))
        per_node = (after - before) * 1024 / nodes
        step.result = (f"hub memory per connected node: {per_node:.1f} KiB "
                       f"({nodes} nodes: {before:.1f} -> {after:.1f} MiB)")
    return per_node


# --- main ----------------------------------------------------------------------------------------


async def step(progress: Progress, what: str, run: Callable[[], Awaitable[Phase]]) -> Phase:
    async with progress.step(what) as running:
        phase = await run()
        running.result = (f"{what}: p50 {phase.p50_ms:.1f} ms, p99 {phase.p99_ms:.1f} ms, "
                          f"{phase.per_second:.0f} tasks/s")
    return phase


async def measure_round(network: EmbeddedNetwork, alice: DemoNode, bob: DemoNode,
                        pids: dict[str, int], tasks: int, progress: Progress, which: str
                        ) -> tuple[dict[str, tuple[Phase, Phase]], dict[str, Work]]:
    """(a) and (b), ``tasks`` one after the other and then at once, with clients of their own
    (a round after another starts from the same state as the first); the work per task of
    each process in (b) sequential."""
    async with direct_http(network, tasks) as direct_transport, \
            endpoint_http(alice, tasks) as endpoint_transport, \
            sdk_client(direct_transport, "http://localhost") as direct, \
            sdk_client(endpoint_transport, alice.agent_url(bob.aid)) as through:
        for client in (direct, through):
            for _ in range(WARM_UP):
                await one_task(client)
        results: dict[str, tuple[Phase, Phase]] = {}
        done: dict[str, Work] = {}
        for name, run in (("sequential", sequential), ("concurrent", concurrent)):
            label = "sequential" if run is sequential else "at once"
            a = await step(progress, f"(a) direct, {tasks} {label}{which}",
                           lambda run=run: run(direct, tasks))
            before = {key: work(pid) for key, pid in pids.items()}
            b = await step(progress, f"(b) network, {tasks} {label}{which}",
                           lambda run=run: run(through, tasks))
            if run is sequential:
                done = {key: (work(pid) - before[key]).per(tasks) for key, pid in pids.items()}
            results[name] = (a, b)
    return results, done


async def bench(args: argparse.Namespace) -> None:
    progress = Progress()
    progress.line(f"anet bench on {machine()}, load average {os.getloadavg()[0]:.1f}")
    probe_before = host_probe_ms()
    figures: dict[str, float | None] = {}
    notes: dict[str, str] = {}
    async with EmbeddedNetwork.open(prefix="anet-bench-") as network:
        async with progress.step("network") as started:
            await network.start_hub("the hub", *HUB_OPTIONS)
            await network.start_agent()
            alice = network.create_node("alice")
            bob = network.create_node("bob", serve_with_agent=True)
            await asyncio.gather(network.start_node(alice), network.start_node(bob))
            await asyncio.gather(network.trust(bob, alice), network.trust(alice, bob))
            await network.listed(alice, bob.aid)
            started.result = (f"hub (on {hub_loop(network)}), alice, bob and the text agent up; "
                              "trust set up")
        await asyncio.sleep(SETTLE_S)
        idle = {name: rss_mib(network.child(name).pid)
                for name in ("alice", "bob", "the hub", "the text agent")}

        tasks = args.tasks
        pids = {"alice": alice.child.pid, "hub": network.child("the hub").pid,
                "bob": bob.child.pid, "text agent": network.child("the text agent").pid,
                "the a2a-sdk client": os.getpid()}
        rounds = [await measure_round(network, alice, bob, pids, tasks, progress,
                                      f" (round {number + 1} of {args.rounds})"
                                      if args.rounds > 1 else "")
                  for number in range(args.rounds)]
        results = {name: (Phase.pooled([got[name][0] for got, _ in rounds]),
                          Phase.pooled([got[name][1] for got, _ in rounds]))
                   for name in ("sequential", "concurrent")}
        per_task = {key: Work.mean([spent[key] for _, spent in rounds]) for key in pids}
        cpu_ms = {key: done.cpu_ms for key, done in per_task.items()}
        busy = {name: rss_mib(network.child(name).pid) for name in ("alice", "bob", "the hub")}

        async with progress.step("anet status, anet --help") as timed:
            status_s = await cli_wall_s(alice, network, "status")
            help_s = await cli_wall_s(alice, network, "--help")
            timed.result = (f"anet status {status_s * 1000:.0f} ms, anet --help "
                            f"{help_s * 1000:.0f} ms (median of {CLI_RUNS})")
        relay = None
        if not args.quick:
            # One run of 5,000 envelopes takes under a second, and the host's speed moves it by a
            # fifth from run to run: the figure is the median of one run per round.
            async with progress.step("hub relay") as relayed:
                rates = [await asyncio.to_thread(node_loop_relay_rate, network.hub_url,
                                                 network.work / f"relay-{number}", args.envelopes,
                                                 RELAY_IN_FLIGHT)
                         for number in range(1, args.rounds + 1)]
                relay = statistics.median(rates)
                relayed.result = (f"hub relay: {args.envelopes} envelopes, {RELAY_IN_FLIGHT} in "
                                  f"flight, {relay:,.0f} /s delivered and acknowledged (median of "
                                  f"{', '.join(f'{rate:,.0f}' for rate in rates)})")
        per_node = None if args.quick else await hub_per_node(network, args.nodes, progress)
        availability = None
        if not args.quick:
            async with progress.step("hub availability (the heartbeats' real timers)") as timed:
                availability = await measure_availability(network.work / "availability")
                timed.result = "; ".join(availability.lines())

    progress.line()
    progress.line(f"Official a2a-sdk client, blocking SendMessage (JSON-RPC), text agent "
                  f"'stats:' on {len(TEXT) - 7} characters:")
    progress.line("  (a) direct: client -> text agent on its unix socket")
    progress.line("  (b) network: client -> alice's local endpoint -> alice -> hub -> bob -> "
                  "text agent, and back with a signed receipt")
    progress.line()
    progress.line(table(results, tasks * args.rounds))
    progress.line()
    progress.line(f"memory (RSS) idle: node {idle['alice']:.1f} MiB (alice), "
                  f"{idle['bob']:.1f} MiB (bob); hub {idle['the hub']:.1f} MiB with 2 nodes; "
                  f"text agent {idle['the text agent']:.1f} MiB")
    progress.line(f"memory (RSS) after the tasks: alice {busy['alice']:.1f} MiB, "
                  f"bob {busy['bob']:.1f} MiB, hub {busy['the hub']:.1f} MiB")
    progress.line("CPU per task in (b) sequential, by process: "
                  + ", ".join(f"{name} {ms:.1f} ms" for name, ms in cpu_ms.items()))
    progress.line("counted per task in (b) sequential, system calls that read / write, and "
                  "sleeps (times the process waited): " + ", ".join(
                      f"{name} {done.reads:.1f} / {done.writes:.1f}, {done.sleeps:.1f}"
                      for name, done in per_task.items() if name in ("alice", "hub", "bob")))
    anet_ms = cpu_ms["alice"] + cpu_ms["hub"] + cpu_ms["bob"]
    progress.line(f"alice + hub + bob spend {anet_ms / cpu_ms['text agent']:.2f} times the text "
                  "agent's CPU per task (a ratio that moves less with the host than either)")
    progress.line(f"host speed: a fixed Python loop took {probe_before:.1f} ms before the run "
                  f"and {host_probe_ms():.1f} ms after it (lower is faster; compare runs by it)")

    (direct_seq, network_seq), (direct_once, network_once) = \
        results["sequential"], results["concurrent"]
    figures |= {
        TARGETS[0].figure: network_seq.p50_ms / direct_seq.p50_ms,
        TARGETS[1].figure: network_seq.p99_ms / direct_seq.p99_ms,
        TARGETS[2].figure: network_once.per_second / direct_once.per_second,
        TARGETS[3].figure: anet_ms,
        TARGETS[4].figure: relay,
        TARGETS[5].figure: max(idle["alice"], idle["bob"]),
        TARGETS[6].figure: idle["the hub"],
        TARGETS[7].figure: per_node,
        TARGETS[8].figure: status_s,
        TARGETS[9].figure: help_s,
        TARGETS[10].figure: availability and availability.failover_s,
        TARGETS[11].figure: availability and availability.frozen_node_s,
        TARGETS[12].figure: availability and availability.frozen_hub_s,
    }
    if tasks != 100:
        notes[TARGETS[2].figure] = f"{tasks} at once"
    if per_node is not None and args.nodes != FULL_NODES:
        notes[TARGETS[7].figure] = f"measured with {args.nodes} nodes; --nodes {FULL_NODES}"
    if args.quick:
        notes |= {target.figure: "--quick" for target in (TARGETS[4], TARGETS[7], *TARGETS[10:])}
    progress.line()
    progress.line(target_table(figures, notes))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=100,
                        help="tasks per phase (sequential, and at once); default 100")
    parser.add_argument("--nodes", type=int, default=FULL_NODES,
                        help="nodes connected to measure the hub's memory per node; "
                             f"default {FULL_NODES}")
    parser.add_argument("--envelopes", type=int, default=5000,
                        help="envelopes relayed between two nodes at the hub; default 5000")
    parser.add_argument("--rounds", type=int, default=3,
                        help="rounds of (a) and (b), each with clients of its own; latencies "
                             "are pooled, CPU per task averaged; default 3")
    parser.add_argument("--quick", action="store_true",
                        help="skip the slow parts: the hub relay and the hub's memory per node")
    parser.add_argument("--timeout", type=float, default=600,
                        help="give up after this many seconds; default 600")
    args = parser.parse_args()
    if not 1 <= args.tasks <= 2000 or not 1 <= args.nodes <= 5000 or \
            not 1 <= args.envelopes <= 100_000 or not 1 <= args.rounds <= 20:
        parser.error("--tasks must be 1-2000, --nodes 1-5000, --envelopes 1-100000 and "
                     "--rounds 1-20")

    async def bounded() -> None:
        async with asyncio.timeout(args.timeout):
            await bench(args)

    try:
        asyncio.run(bounded())
    except TimeoutError:
        print(f"bench: gave up after {args.timeout:.0f} s", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
