"""The requester side of payments, over the real chain: a hub process (its rail), the payer
``alice`` (all modules, its local A2A endpoint driven by the official a2a-sdk client) and the
payee ``bob`` (all modules: module x402's own provider quotes, verifies and settles at the
hub's rail; a worker module does the paid work once the payment verified).

Bob's prices are in his config.json (``modules.x402.prices``), one skill per tier; the client
names the skill with the message metadata ``anet.skill``. The skill ``abroad`` also accepts the
rail of a second real hub process (``modules.x402.rail_urls`` gives bob its URL), where alice
holds no credit. Every skill is priced, so bob's card says ``charge: paid`` and alice's proxy
card declares the a2a-x402 extension."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.types import (
    GetTaskRequest,
    Message,
    SendMessageConfiguration,
    SendMessageRequest,
    Task,
    TaskState,
)
from google.protobuf.json_format import MessageToDict

from anet_a2a.state import StateDir
from anet_core import hookimpl
from anet_core.node import Node
from anet_core.plugins import make_plugins
from anet_core.records import InboundTask, TaskClaim
from anet_x402.rail import RailClient, rail_url
from anet_x402.signer_service import SIGNER
from tests.support.messages import sdk_user_message
from tests.support.nodes import prepare, running_node
from tests.support.processes import HubProcess, NodeDir, free_port

X402 = "https://github.com/google-a2a/a2a-x402/v0.1"
STATUS, REQUIRED, PAYLOAD = "x402.payment.status", "x402.payment.required", "x402.payment.payload"
ACCEPT = "anet.payment.accept"
SKILL = "anet.skill"
TIERS = {"auto_max": {"USD": "0.10"}, "agent_max": {"USD": "1.00"},
         "agent_daily_max": {"USD": "1.20"}}
PRICES = {"work": "0.05", "translate": "0.50", "review": "2.00", "abroad": "0.50"}
"""Bob's skills and their prices: within alice's automatic tier, her agent tier, above both,
and one at two rails (see :func:`bob_config`)."""


@dataclass
class Worker:
    """Bob's work, once the provider admitted the task: answers every task it is given."""

    served: list[dict[str, Any]] = field(default_factory=list)

    @hookimpl
    def anet_take_task(self, node: Node, task: InboundTask) -> TaskClaim:
        async def serve(task: InboundTask, responder: Any) -> None:
            self.served.append(task.message)
            text = task.message["parts"][0].get("text", "")
            await responder.complete(artifacts=[f"paid work: {text}"])

        return TaskClaim(module="worker", serve=serve)


def bob_config(other: tuple[str, str] | None = None) -> tuple[dict[str, Any], dict[str, Any]]:
    """Bob's ``node`` section (his card's skills) and ``modules.x402`` (their prices);
    ``other`` (a hub's AID and rail URL) is the second rail of the skill ``abroad``."""
    node = {"name": "bob", "description": "bob's paid agent",
            "skills": [{"id": skill, "name": skill.title(), "description": "", "tags": []}
                       for skill in PRICES]}
    prices: dict[str, Any] = {skill: {"amount": amount} for skill, amount in PRICES.items()}
    if other is None:
        return node, {"prices": prices}
    other_hub, other_url = other
    prices["abroad"]["rails"] = ["home", other_hub]
    return node, {"prices": prices, "rail_urls": {other_hub: other_url}}


def payments_at(bob: Node, task_id: str) -> list[dict[str, Any]]:
    """The payment messages bob received on the task (his own record of it)."""
    received = bob.tasks.received(task_id) or {}
    return [message for message in received.get("history", [])
            if message.get("role") == "ROLE_USER"
            and (message.get("metadata") or {}).get(STATUS) == "payment-submitted"]


def bob_plugins(worker: Worker) -> Any:
    """Every module, and the worker that does bob's paid work."""
    plugins = make_plugins()
    plugins.pm.register(worker, name="worker")
    return plugins


@dataclass
class Chain:
    hub: HubProcess
    alice: Node
    bob: Node
    worker: Worker
    root: Path

    @property
    def endpoint(self) -> StateDir:
        return StateDir.of(self.alice.paths)

    def agent_url(self) -> str:
        address = self.endpoint.address_file.read_text().strip()
        return f"http://{address}/a2a/v1/agents/{self.bob.aid}"

    def headers(self, *, extension: bool) -> dict[str, str]:
        token = self.endpoint.token_file.read_text().strip()
        return {"Authorization": f"Bearer {token}"} | ({"A2A-Extensions": X402}
                                                       if extension else {})

    async def credit(self, amount: str) -> None:
        """The hub's operator credits alice; alice's signer reads it at once (else within its
        refresh interval)."""
        await asyncio.to_thread(NodeDir(self.root / "alice").run, "hub", "credit",
                                self.alice.aid, amount, "--data", str(self.hub.data))
        await self.alice[SIGNER].credit.refresh()

    def anet(self, *args: str, check: bool = True) -> Any:
        return NodeDir(self.root / "alice").run(*args, check=check)

    def authorizations(self) -> list[dict[str, Any]]:
        path = self.alice.paths.module_dir("x402") / "payer.db"
        with sqlite3.connect(path) as db:
            rows = db.execute("SELECT task_id, tier, amount, nonce FROM authorizations")
            return [dict(zip(("task", "tier", "amount", "nonce"), row, strict=True))
                    for row in rows]

    def payments_at_bob(self, task_id: str) -> list[dict[str, Any]]:
        return payments_at(self.bob, task_id)

    def settled_at_bob(self) -> list[str]:
        """The tasks bob's payment book holds as settled."""
        path = self.bob.paths.module_dir("x402") / "payments.sqlite"
        with sqlite3.connect(path) as db:
            return [row[0] for row in db.execute(
                "SELECT task_id FROM payments WHERE status = 'settled'")]

    def evidence_kinds(self) -> list[str]:
        """Alice's records so far (the chain appends a moment after a task's step)."""
        chain = self.alice.paths.root / "evidence" / "chain.jsonl"
        lines = chain.read_text().splitlines() if chain.exists() else []
        return [json.loads(line)["kind"] for line in lines]


@asynccontextmanager
async def paying_chain(root: Path, tiers: dict[str, Any] | None = None) -> AsyncIterator[Chain]:
    hub = HubProcess(root / "hub", free_port()).start()
    other = HubProcess(root / "other-hub", free_port()).start()
    try:
        async with RailClient(other.url) as rail:
            other_aid = await rail.hub_aid()
        node, x402 = bob_config((other_aid, rail_url(other.url)))
        prepare(root / "bob", node=node, modules={"x402": x402})
        prepare(root / "alice", modules={"x402": TIERS if tiers is None else tiers})
        worker = Worker()
        async with running_node(root / "bob", bob_plugins(worker), hub_url=hub.url) as bob:
            async with running_node(root / "alice", make_plugins(), hub_url=hub.url) as alice:
                bob.tasks.trust(alice.aid)
                yield Chain(hub=hub, alice=alice, bob=bob, worker=worker, root=root)
    finally:
        other.stop()
        hub.stop()


@asynccontextmanager
async def sdk_client(chain: Chain, *, extension: bool,
                     streaming: bool = False) -> AsyncIterator[Client]:
    async with httpx.AsyncClient(headers=chain.headers(extension=extension),
                                 timeout=30) as http:
        client = await ClientFactory(ClientConfig(
            httpx_client=http, streaming=streaming,
            supported_protocol_bindings=["JSONRPC"])).create_from_url(chain.agent_url())
        try:
            yield client
        finally:
            await client.close()


async def send(client: Client, message: Message, *, immediately: bool = False) -> Task:
    """The task a SendMessage answers with (the last event of a stream)."""
    request = SendMessageRequest(message=message, configuration=SendMessageConfiguration(
        return_immediately=immediately))
    events = [event async for event in client.send_message(request)]
    last = events[-1]
    if last.WhichOneof("payload") == "task":
        return last.task
    # A stream: its first event names the task, the rest are its updates.
    states = [event.status_update.status.state for event in events
              if event.WhichOneof("payload") == "status_update"]
    assert TaskState.TASK_STATE_INPUT_REQUIRED not in states[:-1], states
    return await client.get_task(GetTaskRequest(id=events[0].task.id))


def metadata_of(task: Task) -> dict[str, Any]:
    return MessageToDict(task.metadata)


def status_metadata(task: Task) -> dict[str, Any]:
    return MessageToDict(task.status.message.metadata)


def user(text: str, skill: str | None = None, **fields: Any) -> Message:
    """A client's message; ``skill`` names bob's skill (``anet.skill``) for a new task."""
    if skill is not None:
        fields["metadata"] = {SKILL: skill} | fields.get("metadata", {})
    return sdk_user_message(text, **fields)
