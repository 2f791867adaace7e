"""A hub of several instances (`anet hub serve --postgres … --nats …`, real processes) on a real
PostgreSQL and a real NATS (tests.hub.servers), with real nodes running their task layers in this
process: tasks across instances, the SIGKILL of an instance under 200 tasks, restarts of
PostgreSQL and of NATS. Every task must end, and none may reach the provider twice."""

from __future__ import annotations

import asyncio
import json
import shutil
import subprocess
import uuid
from collections import Counter
from collections.abc import Iterator
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

pytest.importorskip("asyncpg")
pytest.importorskip("nats")

from anet_core.identity import Identity
from anet_core.link.contract import JoinState
from anet_core.node import Node
from anet_hub.deployment import Deployment
from tests.hub.network import (
    RECOVERY_S,
    Provider,
    all_completed,
    send_tasks,
    start_node,
    states,
)
from tests.hub.servers import (  # noqa: F401 - the fixtures
    NatsServer,
    PostgresServer,
    TcpBalancer,
    nats,
    postgres,
)
from tests.support.hubs import get_json
from tests.support.processes import ANET, REPO, HubProcess, free_port
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(240)

TASKS_UNDER_KILL = 200
SEND_PAUSE_S = 0.02


@dataclass
class Cluster:
    """Instances of one hub: the first makes the operator key, the others get a copy of it."""

    root: Path
    database: str
    nats_url: str
    public_url: str | None = None
    """Every instance's ``--public-url`` (a balancer's); without it, each advertises its own."""
    federate: tuple[str, ...] = ()
    """``--federate`` of every instance."""
    instances: list[HubProcess] = field(default_factory=list)

    def identity(self) -> str:
        """The hub's AID, its operator key made before the first instance starts."""
        directory = self.root / "instance0" / "hub" / "identity"
        if not (directory / "history.json").exists():
            return Identity.create(directory).aid
        return Identity.load(directory).aid

    def add(self, port: int | None = None) -> HubProcess:
        data = self.root / f"instance{len(self.instances)}" / "hub"
        if self.instances:
            data.mkdir(parents=True)
            shutil.copytree(self.instances[0].data / "identity", data / "identity")
        port = port or free_port()
        options = ["--postgres", self.database, "--nats", self.nats_url,
                   "--public-url", self.public_url or f"ws://127.0.0.1:{port}"]
        for peer in self.federate:
            options += ["--federate", peer]
        instance = HubProcess(data, port, options=tuple(options)).start()
        self.instances.append(instance)
        return instance

    def stop(self) -> None:
        for instance in self.instances:
            instance.stop()


@pytest.fixture
def cluster(tmp_path: Path, postgres: PostgresServer,  # noqa: F811 - the fixtures
            nats: NatsServer) -> Iterator[Cluster]:  # noqa: F811
    database = postgres.create_database(f"hub_{uuid.uuid4().hex[:12]}")
    made = Cluster(tmp_path / "hub", database, nats.url)
    try:
        yield made
    finally:
        made.stop()


def test_an_instance_without_its_database_exits_naming_it(
        tmp_path: Path, postgres: PostgresServer) -> None:  # noqa: F811 - the fixture
    """The database is the operator's to create (docs/hub.md, "Cluster"): without it the
    instance exits 1 with the documented code and PostgreSQL's own words."""
    missing = postgres.database_url(f"missing_{uuid.uuid4().hex[:8]}")
    result = subprocess.run([*ANET, "hub", "serve", "--listen", f"127.0.0.1:{free_port()}",
                             "--data", str(tmp_path / "hub"), "--postgres", missing],
                            capture_output=True, text=True, timeout=60, cwd=REPO, check=False)
    assert result.returncode == 1, result.stderr
    assert "does not exist (hub-storage-unreachable)" in result.stderr, result.stderr


async def metric(instance: HubProcess, name: str) -> float:
    async with aiohttp.ClientSession() as http, \
            http.get(f"http://127.0.0.1:{instance.port}/metrics") as response:
        return summed(await response.text(), name)


async def node_metric(node: Node, name: str) -> float:
    """From the node's control plane, with its control token, as Prometheus scrapes it."""
    token = node.paths.control_token.read_text().strip()
    url = f"http://{node.listeners['control'].address}/metrics/"
    async with aiohttp.ClientSession() as http, \
            http.get(url, headers={"Authorization": f"Bearer {token}"}) as response:
        assert response.status == 200, await response.text()
        return summed(await response.text(), name)


def summed(exposition: str, name: str) -> float:
    """The sum of the samples of ``name`` (``name{labels}`` picks some)."""
    prefix = name if "{" in name else None
    return sum(float(line.split()[-1]) for line in exposition.splitlines()
               if (line.startswith(prefix) if prefix else
                   line.startswith(name + " ") or line.startswith(name + "{")))


async def hub_doctor(data: Path, *extra: str) -> tuple[int, list[dict[str, Any]]]:
    process = await asyncio.create_subprocess_exec(
        *ANET, "hub", "doctor", "--data", str(data), "--json", *extra, cwd=REPO,
        stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    async with asyncio.timeout(30):
        out, err = await process.communicate()
    assert out, err.decode()
    return process.returncode or 0, json.loads(out)


def down(report: list[dict[str, Any]]) -> list[str]:
    return [item["name"] for item in report if not item["ok"]]


async def kill_under_load(alice: Node, bob: Node, provider: Provider,
                          victim: HubProcess) -> asyncio.Task[list[str]]:
    """alice's TASKS_UNDER_KILL tasks to bob on their way at a steady pace, and ``victim``
    SIGKILLed once a quarter of them were served, before half were: the sending."""
    sending = asyncio.create_task(send_tasks(alice, bob, TASKS_UNDER_KILL, "load",
                                             pause=SEND_PAUSE_S))
    await eventually(lambda: len(provider.served) >= TASKS_UNDER_KILL // 4,
                     "a quarter of the tasks served")
    victim.kill()
    assert len(provider.served) < TASKS_UNDER_KILL // 2, "the kill came after most of the traffic"
    return sending


def assert_each_served_once(provider: Provider, ids: list[str]) -> None:
    assert sorted(provider.served) == sorted(ids)
    twice = {task_id: n for task_id, n in provider.served.items() if n != 1}
    assert twice == {}, f"served more than once: {twice}"


async def test_tasks_across_two_instances(cluster: Cluster, tmp_path: Path) -> None:
    first, second = cluster.add(), cluster.add()
    provider = Provider()
    async with AsyncExitStack() as stack:
        bob = await start_node(stack, tmp_path / "bob", second.url, provider)
        alice = await start_node(stack, tmp_path / "alice", first.url)
        # One directory: each instance answers for a node connected to the other.
        assert (await alice.hub.peer(bob.identity.aid)).aid == bob.identity.aid
        ids = await send_tasks(alice, bob, 20, "across")
        await all_completed(alice, ids)
        done = alice.tasks.get(None, ids[3])
        assert done["artifacts"][0]["parts"] == [{"text": "done: across 3"}]
        assert done["metadata"]["anet.receipt_verified"] is True
        assert sorted(provider.served) == sorted(ids) and set(provider.served.values()) == {1}
        assert await node_metric(alice, "anet_node_envelopes_sent_total") >= 20
        assert await node_metric(bob, "anet_node_envelopes_received_total") >= 20
        assert await node_metric(
            alice, 'anet_node_tasks{role="requester",state="TASK_STATE_COMPLETED"}') == 20
        assert await node_metric(
            bob, 'anet_node_tasks{role="provider",state="TASK_STATE_COMPLETED"}') == 20
        assert await node_metric(alice, "anet_node_outbox_depth") == 0

        # Alice's envelopes were accepted at the first instance and acknowledged at the second.
        assert await metric(first, "anet_hub_envelopes_relayed_total") >= 20
        assert await metric(second, "anet_hub_envelopes_delivered_total") >= 20
        assert await metric(second, "anet_hub_relay_latency_seconds_count") >= 20
        assert await metric(first, "anet_hub_connected_nodes") == 1
        assert await metric(first, "anet_hub_broker_connected") == 1
        for instance in (first, second):
            status, ready = await get_json(f"http://127.0.0.1:{instance.port}/readyz")
            assert status == 200 and ready["ready"] is True
            assert [item["name"] for item in ready["dependencies"]] == ["storage", "broker"]
            assert (await get_json(f"http://127.0.0.1:{instance.port}/healthz"))[0] == 200
        code, report = await hub_doctor(second.data, "--url", f"http://127.0.0.1:{second.port}")
        assert code == 0 and [item["name"] for item in report] == [
            "identity", "storage", "broker", "instance"]


async def test_an_instance_killed_under_200_tasks(cluster: Cluster, tmp_path: Path) -> None:
    balancer = TcpBalancer([]).start()
    try:
        cluster.public_url = balancer.url
        balancer.backends.extend(cluster.add().port for _ in range(3))
        provider = Provider()
        async with AsyncExitStack() as stack:
            alice = await start_node(stack, tmp_path / "alice", balancer.url)
            before = Counter(balancer.connections)
            bob = await start_node(stack, tmp_path / "bob", balancer.url, provider)
            [bobs_port] = (Counter(balancer.connections) - before).keys()
            victim = next(i for i in cluster.instances if i.port == bobs_port)

            sending = await kill_under_load(alice, bob, provider, victim)
            ids = await asyncio.wait_for(sending, RECOVERY_S)
            await eventually(lambda: bob.hub.status.state is not JoinState.REGISTERED
                        or balancer.connections[bobs_port] == 0, "bob lost his instance")
            await all_completed(alice, ids, RECOVERY_S)
            await eventually(lambda: bob.hub.status.state is JoinState.REGISTERED,
                        "bob registered at another instance")
            assert balancer.connections[bobs_port] == 0
            assert_each_served_once(provider, ids)
    finally:
        balancer.stop()


async def test_a_node_joined_at_one_instance_learns_the_others_and_fails_over_to_them(
        cluster: Cluster, tmp_path: Path) -> None:
    """Each instance advertises its ``--public-url``; bob is joined with the first instance's
    URL only. That instance is SIGKILLed under 200 tasks and stays down: bob goes on at an
    instance he learned of, every task completes once, and he finds it again after a restart
    of his node."""
    instances = [cluster.add() for _ in range(3)]
    urls = sorted(instance.url for instance in instances)
    victim = instances[0]
    await eventually(lambda: advertised(victim, urls), "the first instance advertises all three")
    provider = Provider()
    async with AsyncExitStack() as stack:
        bob_stack = await stack.enter_async_context(AsyncExitStack())
        bob = await start_node(bob_stack, tmp_path / "bob", victim.url, provider)
        alice = await start_node(stack, tmp_path / "alice", instances[2].url)
        assert sorted(bob.hub.status.hub_urls) == urls
        sending = await kill_under_load(alice, bob, provider, victim)
        await eventually(lambda: bob.hub.status.state is JoinState.REGISTERED
                         and bob.hub.status.hub_url != victim.url,
                         "bob registered at an instance he was not told of", RECOVERY_S)
        ids = await asyncio.wait_for(sending, RECOVERY_S)
        await all_completed(alice, ids, RECOVERY_S)
        assert_each_served_once(provider, ids)

        await bob_stack.aclose()  # bob's node restarts, joined with the dead URL only
        bob = await start_node(stack, tmp_path / "bob", victim.url, provider)
        assert victim.process is None and bob.hub.status.hub_url != victim.url
        await all_completed(alice, await send_tasks(alice, bob, 5, "after the restart"))


async def test_two_federated_clusters_with_an_instance_of_each_killed_in_turn(
        tmp_path: Path, postgres: PostgresServer,  # noqa: F811 - the fixtures
        nats: NatsServer) -> None:  # noqa: F811
    """Hubs one and two, two instances each, federated by naming only the other's first
    instance (the second is advertised). alice is at one, bob at two. Killed in turn: two's
    first instance (bob's, and the URL one was told), then one's first (alice's), which then
    comes back while two's first is still down and finds two's second from what the cluster
    saved; then one's second. Every task completes, none served twice."""
    one, two = (Cluster(tmp_path / name, postgres.create_database(f"hub_{uuid.uuid4().hex[:12]}"),
                        nats.url) for name in ("one", "two"))
    one_port, two_port = free_port(), free_port()
    one.federate = (f"{two.identity()}@ws://127.0.0.1:{two_port}",)
    two.federate = (f"{one.identity()}@ws://127.0.0.1:{one_port}",)
    try:
        for cluster, port in ((two, two_port), (one, one_port)):
            cluster.add(port), cluster.add()
            urls = sorted(instance.url for instance in cluster.instances)
            await eventually(lambda c=cluster, u=urls: advertised(c.instances[0], u),
                             "the first instance advertises both", 30)
        provider, ids = Provider(), []
        async with AsyncExitStack() as stack:
            bob = await start_node(stack, tmp_path / "bob", two.instances[0].url, provider)
            alice = await start_node(stack, tmp_path / "alice", one.instances[0].url)
            await eventually(lambda: federation_up(one), "hub one's links are up", 30)
            ids += await send_tasks(alice, bob, 10, "both up")
            await all_completed(alice, ids)

            two.instances[0].kill()
            ids += await send_tasks(alice, bob, 10, "two's first killed")
            await all_completed(alice, ids, RECOVERY_S)
            assert bob.hub.status.hub_url == two.instances[1].url

            one.instances[0].kill()
            ids += await send_tasks(alice, bob, 10, "one's first killed")
            await all_completed(alice, ids, RECOVERY_S)
            one.instances[0].start()  # two's first is still down: the saved instances
            await eventually(lambda: federation_up(one, only=one.instances[0]),
                             "the restarted instance linked to two's second", 30)
            one.instances[1].kill()
            ids += await send_tasks(alice, bob, 10, "one's second killed")
            await all_completed(alice, ids, RECOVERY_S)
            assert alice.hub.status.hub_url == one.instances[0].url
            assert_each_served_once(provider, ids)
    finally:
        one.stop()
        two.stop()


async def federation_up(cluster: Cluster, only: HubProcess | None = None) -> bool:
    """Each running instance of ``cluster`` (or ``only``) has its links up."""
    for instance in [only] if only else cluster.instances:
        if instance.process is None:
            continue
        status, info = await get_json(f"http://127.0.0.1:{instance.port}/v1/hub")
        if status != 200 or not all(link["state"] == "up" for link in info["federation"]):
            return False
    return True


async def advertised(instance: HubProcess, urls: list[str]) -> bool:
    """``instance`` advertises exactly ``urls``, in its ``GET /v1/hub`` (signed)."""
    status, info = await get_json(f"http://127.0.0.1:{instance.port}/v1/hub")
    return status == 200 and (info["instances"] or {}).get("urls") == urls


async def test_postgres_and_nats_restart(cluster: Cluster, tmp_path: Path,
                                         postgres: PostgresServer,  # noqa: F811
                                         nats: NatsServer) -> None:  # noqa: F811
    first, second = cluster.add(), cluster.add()
    provider = Provider()
    readyz = f"http://127.0.0.1:{first.port}/readyz"
    async with AsyncExitStack() as stack:
        bob = await start_node(stack, tmp_path / "bob", second.url, provider)
        alice = await start_node(stack, tmp_path / "alice", first.url)
        await all_completed(alice, await send_tasks(alice, bob, 5, "warm-up"))

        nats.stop()
        try:
            status, ready = await eventually(lambda: _not_ready(readyz), "readyz reports NATS down")
            assert status == 503 and _down_names(ready) == ["broker"]
            code, report = await hub_doctor(first.data, "--url", f"http://127.0.0.1:{first.port}")
            assert code == 1 and down(report) == ["broker", "instance"]
            during = await send_tasks(alice, bob, 5, "nats-down")
        finally:
            nats.start()
        await all_completed(alice, during)
        await eventually(lambda: _ready(readyz), "readyz is ready again after NATS")

        postgres.stop()
        try:
            status, ready = await eventually(lambda: _not_ready(readyz), "readyz reports PG down")
            assert status == 503 and "storage" in _down_names(ready)
            code, report = await hub_doctor(first.data)
            assert code == 1 and down(report) == ["storage"]
            during = await send_tasks(alice, bob, 5, "postgres-down")
            # Held, not refused: each says why it waits (anet.reason), until PostgreSQL is back.
            await eventually(lambda: {reason_of(alice, task_id) for task_id in during}
                             == {"hub_unreachable"}, "the held tasks say why they wait")
            assert states(alice, during) == Counter({"TASK_STATE_SUBMITTED": 5})
        finally:
            postgres.start()
        await all_completed(alice, during)
        assert {reason_of(alice, task_id) for task_id in during} == {None}
        await eventually(lambda: _ready(readyz), "readyz is ready again after PostgreSQL")
        assert set(provider.served.values()) == {1} and len(provider.served) == 15
        assert await metric(first, "anet_hub_storage_errors_total") >= 1
        # The readiness probe's own storage call failed, and was counted under its name.
        assert await metric(first, 'anet_hub_storage_errors_total{operation="ping"}') >= 1
        assert await metric(first, "anet_hub_broker_errors_total") >= 1


def reason_of(alice: Node, task_id: str) -> str | None:
    return alice.tasks.get(None, task_id)["metadata"].get("anet.reason")


async def _not_ready(url: str) -> tuple[int, Any] | None:
    status, body = await get_json(url)
    return (status, body) if status != 200 else None


async def _ready(url: str) -> bool:
    return (await get_json(url))[0] == 200


def _down_names(ready: dict[str, Any]) -> list[str]:
    return [item["name"] for item in ready["dependencies"] if not item["ok"]]


# --- two instances in this process, to look inside -------------------------------------------


async def test_one_hub_across_instances_for_limits_presence_and_replacement(
        tmp_path: Path, hub_factory: Any, raw: Any, nodes: Any, inbox_factory: Any,
        postgres: PostgresServer, nats: NatsServer) -> None:  # noqa: F811
    deployment = Deployment(postgres=postgres.create_database(f"hub_{uuid.uuid4().hex[:12]}"),
                            nats=nats.url)
    limits = {"rate_per_second": 0.01, "burst": 4}  # four requests, then none for 100 s
    first = await hub_factory(data_dir=tmp_path / "one", deployment=deployment, **limits)
    (tmp_path / "two").mkdir()
    shutil.copytree(tmp_path / "one" / "identity", tmp_path / "two" / "identity")
    second = await hub_factory(data_dir=tmp_path / "two", deployment=deployment, **limits)
    assert first.state.identity.aid == second.state.identity.aid

    # Presence: bob at the second instance is online in the first one's directory.
    await nodes.connect("bob", second, receiver=inbox_factory())
    bob = nodes.identity("bob").aid
    dave = nodes.identity("dave")
    ws_one = await raw.register(first, dave)
    entry = await raw.ask(ws_one, {"type": "lookup", "rid": "1", "aid": bob})
    assert entry["entry"]["online"] is True
    for rid in "23":
        assert (await raw.ask(ws_one, {"type": "lookup", "rid": rid, "aid": bob}))["type"] \
            == "entry"

    # Dave connects again, at the other instance: the older connection is closed, as one hub
    # closes it, and the token bucket follows him (the register frame is not charged).
    ws_two = await raw.register(second, dave)
    closed = await ws_one.receive(timeout=10)
    assert closed.type is aiohttp.WSMsgType.CLOSE and closed.data == 4001
    assert (await raw.ask(ws_two, {"type": "lookup", "rid": "4", "aid": bob}))["type"] == "entry"
    refused = await raw.ask(ws_two, {"type": "lookup", "rid": "5", "aid": bob})
    assert refused["reason"] == "rate-limited" and refused["retryAfter"] > 1
    await eventually(lambda: dave.aid in second.state.relay.connections
                and dave.aid not in first.state.relay.connections, "dave only at the second")
