"""Two real nodes at a real hub for the payee's tests: alice asks, bob (module x402, priced
skills) answers; payments are signed with the payer's own key (``sign_authorization``) and sent
on the task as the requester's node sends an answer."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anet_core import hookimpl
from anet_core.node import Node
from anet_core.plugins import Plugins, make_plugins
from anet_core.protocol.envelope import seal
from anet_core.protocol.payments import sign_authorization
from anet_core.protocol.tasks import TaskMessage, wire_body
from anet_core.records import TaskClaim
from anet_core.tasks.common import new_id
from anet_hub import admin
from anet_x402 import plugin as x402_plugin
from anet_x402.signer_service import SIGNER
from tests.support.messages import user_message
from tests.support.nodes import plugins_with, prepare, running_node
from tests.support.payments import assert_ledger_conserved
from tests.support.processes import HubProcess, NodeDir, free_port
from tests.support.waiting import eventually

SKILL = "summarize"
PRICES = {SKILL: {"amount": "0.05"}}


class Worker:
    """A module that serves the priced skill: counts the tasks it is given, answers each."""

    def __init__(self) -> None:
        self.served: list[dict[str, Any]] = []

    @hookimpl
    def anet_take_task(self, node, task):  # type: ignore[no-untyped-def]
        if task.skill != SKILL:
            return None

        async def serve(task, responder):  # type: ignore[no-untyped-def]
            self.served.append(task.message)
            await responder.complete(artifacts=["the summary"])

        return TaskClaim(module="worker", serve=serve)


@dataclass
class Pair:
    alice: Node
    bob: Node

    def task(self, task_id: str) -> dict[str, Any]:
        return self.alice.tasks.get(self.bob.aid, task_id)

    def state(self, task_id: str) -> str:
        return str(self.task(task_id)["status"]["state"])

    def status_metadata(self, task_id: str) -> dict[str, Any]:
        return dict(self.task(task_id)["status"].get("message", {}).get("metadata", {}))

    async def ask(self, text: str = "summarize this",
                  skill: str | None = SKILL) -> dict[str, Any]:
        task = await self.alice.tasks.send(self.bob.aid, user_message(text, new_id()),
                                           skill=skill)
        await eventually(lambda: self.task(task["id"])["metadata"]["anet.state_seq"] >= 1,
                         "bob answered the task")
        return self.task(task["id"])

    async def answer(self, task: dict[str, Any], metadata: dict[str, Any],
                     text: str = "here is the payment") -> str:
        """Alice's answer on ``task`` with ``metadata`` on the message, sealed and sent as her
        node sends a continuation; returns its messageId."""
        message, envelope = await self.sealed(task, metadata, text)
        await self.alice.hub.send(envelope)
        return str(message["messageId"])

    async def sealed(self, task: dict[str, Any], metadata: dict[str, Any],
                     text: str = "here is the payment") -> tuple[dict[str, Any], dict[str, Any]]:
        """Alice's answer on ``task`` (the message, and the envelope sealed for bob), unsent."""
        message = user_message(text, new_id(), taskId=task["id"], contextId=task["contextId"],
                               metadata=metadata)
        body = TaskMessage(task_id=task["id"], context_id=task["contextId"], message=message)
        peer = await self.alice.hub.peer(self.bob.aid)
        assert peer.encryption_key
        return message, seal(self.alice.identity, self.bob.aid, peer.encryption_key,
                             wire_body(body))


def quote_of(pair: Pair, task_id: str) -> dict[str, Any]:
    required: dict[str, Any] = pair.status_metadata(task_id)["x402.payment.required"]
    return required


def payment(pair: Pair, option: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """A v2 PaymentPayload for ``option``, signed by alice; ``changes`` alter what she signs."""
    signed = {"payee": option["payTo"], "network": option["network"], "asset": option["asset"],
              "amount": int(option["amount"]), "task": option["extra"]["task"]} | changes
    authorization = sign_authorization(pair.alice.identity, valid_for_s=600, **signed)
    return {"x402Version": 2, "accepted": option, "payload": {"authorization": authorization}}


def submitted(payload: dict[str, Any]) -> dict[str, Any]:
    return {"x402.payment.status": "payment-submitted", "x402.payment.payload": payload}


@asynccontextmanager
async def alice_and_bob(root: Path, hub_url: str, *, prices: dict[str, Any] | None = None,
                        worker: Worker | None = None) -> AsyncIterator[Pair]:
    """alice (no module) and bob (module x402 with ``prices``), both registered at the hub;
    bob trusts alice. Without a ``worker`` module bob's paid tasks wait in his inbox."""
    prepare(root / "bob", modules={"x402": {"prices": PRICES if prices is None else prices}},
            node={"name": "bob", "description": "bob's agent",
                  "skills": [{"id": SKILL, "name": "Summarize", "description": "",
                              "tags": []},
                             {"id": "echo", "name": "Echo", "description": "", "tags": []}]})
    async with AsyncExitStack() as stack:
        alice = await stack.enter_async_context(running_node(root / "alice", hub_url=hub_url))
        bob = await stack.enter_async_context(running_node(
            root / "bob", plugins_with(x402_plugin, *([worker] if worker else [])),
            hub_url=hub_url))
        bob.tasks.trust(alice.aid)
        yield Pair(alice, bob)


async def bob_and_credited_alice(stack: AsyncExitStack, root: Path, hub: HubProcess,
                                 hub_url: str, bob_plugins: Plugins) -> tuple[Node, Node]:
    """bob (``bob_plugins``) and alice (every module) running, prepared under ``root`` and
    joined at ``hub_url`` (the hub, or a proxy in front of it); bob trusts alice, and alice
    holds 1.00 USD at ``hub``'s rail, her signing service told so."""
    bob = await stack.enter_async_context(running_node(root / "bob", bob_plugins,
                                                       hub_url=hub_url))
    alice = await stack.enter_async_context(running_node(root / "alice", make_plugins(),
                                                         hub_url=hub_url))
    bob.tasks.trust(alice.aid)
    await asyncio.to_thread(admin.credit, hub.data, alice.aid, "1.00", "USD")
    await alice[SIGNER].credit.refresh()
    return bob, alice


@dataclass
class PaidPair:
    """alice pays with her signing service, bob's module x402 quotes and settles."""

    hub: HubProcess
    alice: Node
    alice_plugins: Plugins
    bob: Node
    worker: Worker

    def task(self, task_id: str) -> dict[str, Any]:
        return self.alice.tasks.get(None, task_id)


@asynccontextmanager
async def payer_and_payee(root: Path, price: str, tiers: dict[str, Any], *,
                          worker: Worker | None = None) -> AsyncIterator[PaidPair]:
    """A hub process; bob (every module, ``worker`` or a :class:`Worker`) prices the skill at
    ``price`` and trusts alice; alice (every module, the spending ``tiers``) holds 5.00 USD at
    the hub's rail. The ledger is checked conserved when it ends."""
    hub = HubProcess(root / "hub", free_port()).start()
    try:
        worker = worker or Worker()
        prepare(root / "bob", node={"name": "bob", "skills": [{"id": SKILL, "name": "Sum"}]},
                modules={"x402": {"prices": {SKILL: {"amount": price}}}})
        prepare(root / "alice", modules={"x402": tiers})
        bob_plugins, alice_plugins = make_plugins(), make_plugins()
        bob_plugins.pm.register(worker, name="worker")
        async with running_node(root / "bob", bob_plugins, hub_url=hub.url) as bob, \
                running_node(root / "alice", alice_plugins, hub_url=hub.url) as alice:
            bob.tasks.trust(alice.aid)
            await asyncio.to_thread(NodeDir(root / "alice").run, "hub", "credit", alice.aid,
                                    "5.00", "--data", str(hub.data))
            await alice[SIGNER].credit.refresh()
            yield PaidPair(hub, alice, alice_plugins, bob, worker)
    finally:
        hub.stop()
    assert_ledger_conserved(root / "hub")
