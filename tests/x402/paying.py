"""The requester side of payments, over the real chain: a hub process (its rail), the payer
``alice`` (all modules, its local A2A endpoint driven by the official a2a-sdk client) and the
payee ``bob``, whose agent quotes, settles the payment it gets at the hub's rail and only then
does the work (``QuotingAgent``, a module of the test).

A text ``price=0.50 …`` sets the price; ``rails=2`` adds a second option at a rail of another
hub (which alice cannot pay). Bob's agent prices the skill it offers on bob's network card, so
the card says ``charge: paid`` and alice's proxy card declares the a2a-x402 extension."""

from __future__ import annotations

import asyncio
import json
import re
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
from x402.schemas import PaymentPayload, PaymentRequirements

from anet_a2a.state import StateDir
from anet_core import hookimpl
from anet_core.node import Node
from anet_core.plugins import make_plugins
from anet_core.protocol.payments import parse_amount, rail_network
from anet_core.records import InboundTask, SkillSource, TaskClaim
from anet_x402.rail import RailClient
from anet_x402.signer_service import SIGNER
from tests.support.messages import sdk_user_message
from tests.support.nodes import plugins_with, prepare, running_node
from tests.support.processes import HubProcess, NodeDir, free_port

X402 = "https://github.com/google-a2a/a2a-x402/v0.1"
STATUS, REQUIRED, PAYLOAD = "x402.payment.status", "x402.payment.required", "x402.payment.payload"
ACCEPT = "anet.payment.accept"
OTHER_HUB = "b" * 32
"""A hub alice holds no credit at (its rail is not hers to ask)."""
TIERS = {"auto_max": {"USD": "0.10"}, "agent_max": {"USD": "1.00"},
         "agent_daily_max": {"USD": "1.20"}}


@dataclass
class QuotingAgent:
    """Bob's agent: quotes every task, settles the payment message it gets, then completes."""

    hub_url: str
    answers: list[dict[str, Any]] = field(default_factory=list)
    settled: list[dict[str, Any]] = field(default_factory=list)
    charges: bool = True

    @hookimpl
    def anet_card_skills(self, node: Node) -> list[SkillSource]:
        async def read() -> list[dict[str, Any]]:
            return [{"id": "work", "name": "Work", "description": "Paid work", "tags": []}]

        prices = {"work": {"amount": "0.05", "asset": "USD"}} if self.charges else {}
        return [SkillSource(module="quoting", read=read, prices=prices)]

    @hookimpl
    def anet_take_task(self, node: Node, task: InboundTask) -> TaskClaim:
        async def serve(task: InboundTask, responder: Any) -> None:
            text = task.message["parts"][0].get("text", "")
            requirements = await self.requirements(node, task, text)
            required = {"x402Version": 2, "error": "Payment required",
                        "resource": {"url": f"anet:{node.aid}#work"},
                        "accepts": [r.model_dump(by_alias=True, exclude_none=True)
                                    for r in requirements]}
            await responder.input_required({"parts": [{"text": "Payment required"}],
                                            "metadata": {STATUS: "payment-required",
                                                         REQUIRED: required}})
            answer = await responder.next_message()
            self.answers.append(answer)
            metadata = answer.get("metadata") or {}
            payload = PaymentPayload.model_validate(metadata[PAYLOAD])
            chosen = next(r for r in requirements if r.network == payload.accepted.network)
            async with RailClient(self.hub_url) as rail:
                settled = await rail.settle(payload, chosen)
            self.settled.append(settled.model_dump(by_alias=True, exclude_none=True))
            if not settled.success:
                await responder.fail(f"settlement failed: {settled.error_reason}")
                return
            await responder.complete(artifacts=[f"paid work: {text}"])

        return TaskClaim(module="quoting", serve=serve)

    async def requirements(self, node: Node, task: InboundTask,
                           text: str) -> list[PaymentRequirements]:
        price = re.search(r"price=([0-9.]+)", text)
        amount = parse_amount(price.group(1) if price else "0.05", "USD")
        async with RailClient(self.hub_url) as rail:
            hub = await rail.hub_aid()
        hubs = [hub] + ([OTHER_HUB] if "rails=2" in text else [])
        return [PaymentRequirements(scheme="exact", network=rail_network(aid), asset="USD",
                                    amount=str(amount), pay_to=node.aid,
                                    max_timeout_seconds=600,
                                    extra={"task": task.task_id, "hubUrl": self.hub_url})
                for aid in hubs]


@dataclass
class Chain:
    hub: HubProcess
    alice: Node
    bob: Node
    agent: QuotingAgent
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

    def evidence_kinds(self) -> list[str]:
        lines = (self.alice.paths.root / "evidence" / "chain.jsonl").read_text().splitlines()
        return [json.loads(line)["kind"] for line in lines]


async def charging(bob: Node, agent: QuotingAgent, charges: bool) -> None:
    """Bob's agent prices its skill, or not; bob's card is published again."""
    agent.charges = charges
    await bob.hub.refresh_card()


@asynccontextmanager
async def paying_chain(root: Path, tiers: dict[str, Any] | None = None) -> AsyncIterator[Chain]:
    hub = HubProcess(root / "hub", free_port()).start()
    try:
        agent = QuotingAgent(hub_url=hub.url)
        prepare(root / "alice", modules={"x402": TIERS if tiers is None else tiers})
        async with running_node(root / "bob", plugins_with(agent), hub_url=hub.url) as bob:
            async with running_node(root / "alice", make_plugins(), hub_url=hub.url) as alice:
                bob.tasks.trust(alice.aid)
                yield Chain(hub=hub, alice=alice, bob=bob, agent=agent, root=root)
    finally:
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


def user(text: str, **fields: Any) -> Message:
    return sdk_user_message(text, **fields)


async def settle_down(chain: Chain) -> None:
    """Let the chain finish what is in flight before the ledger is read."""
    await asyncio.sleep(0.2)
