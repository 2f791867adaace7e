"""A cancel racing the payment of a priced task, at each step of it: one decision, on both nodes,
in the hub's ledger and in the evidence chains (docs/payments.md, "Cancel and settlement").

A real ``anet hub serve`` process, killed and restarted where a test says; alice (every
module, the automatic tier) pays bob (module x402 and a worker that finishes when the test
says). Both reach the hub through a loopback proxy (tests/x402/holding_proxy) that holds one rail
request (bob's verify or settle, alice's void) before the hub or after the hub answered it.
Each test cancels at one step and then checks :func:`tests.support.outcomes.assert_one_outcome`:
a transfer exists exactly when the task completed, with the receipt, on both nodes; otherwise
neither completed and nothing moved.

"alice voided, then stopped": the state a payer killed between its void at the rail and the
commit of its cancel leaves (the void is the rail's; the cancel never happened here); bob's
node ends the task canceled from what the rail answers, and alice's follows his update.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from a2a.client import ClientConfig, ClientFactory
from a2a.types import CancelTaskRequest
from a2a.utils.errors import TaskNotCancelableError

from anet_a2a.state import StateDir
from anet_core import hookimpl
from anet_core.link.contract import JoinState
from anet_core.node import Node
from anet_core.records import InboundTask, TaskClaim
from anet_core.tasks import TaskNotCancelable
from anet_x402 import plugin as x402_plugin
from anet_x402.signer_service import SIGNER
from tests.support.messages import user_message
from tests.support.nodes import plugins_with, prepare
from tests.support.outcomes import (
    COMPLETED,
    TERMINAL,
    assert_one_outcome,
    chain_records,
    state_of,
)
from tests.support.processes import HubProcess, free_port
from tests.support.waiting import eventually
from tests.x402.holding_proxy import Moment, RailProxy
from tests.x402.payee import bob_and_credited_alice

pytestmark = pytest.mark.timeout(120)

SKILL, DEAR = "summarize", "review"
PRICES = {SKILL: {"amount": "0.05"}, DEAR: {"amount": "5.00"}}
"""Within alice's automatic tier, and above every tier she has (the operator pays it)."""
TIERS = {"auto_max": {"USD": "0.10"}}
HOLD_S = 30.0
RESTART_S = 60.0
CANCELED = "TASK_STATE_CANCELED"
WORKING = "TASK_STATE_WORKING"
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"


@dataclass
class Worker:
    """Bob's paid work: it starts when the payment verified, and ends when ``finish`` is set."""

    started: asyncio.Event = field(default_factory=asyncio.Event)
    finish: asyncio.Event = field(default_factory=asyncio.Event)
    served: list[str] = field(default_factory=list)

    @hookimpl
    def anet_take_task(self, node: Node, task: InboundTask) -> TaskClaim:
        async def serve(task: InboundTask, responder: Any) -> None:
            self.served.append(task.task_id)
            self.started.set()
            await self.finish.wait()
            await responder.complete(artifacts=["the summary"])

        return TaskClaim(module="worker", serve=serve)


@dataclass
class Race:
    hub: HubProcess
    proxy: RailProxy
    alice: Node
    bob: Node
    worker: Worker

    async def ask(self, skill: str = SKILL) -> str:
        task = await self.alice.tasks.send(self.bob.aid, user_message("summarize this"),
                                           skill=skill)
        return str(task["id"])

    async def cancel_refused(self, task_id: str) -> TaskNotCancelable:
        with pytest.raises(TaskNotCancelable) as refused:
            await self.alice.tasks.cancel(self.bob.aid, task_id)
        return refused.value

    async def alice_voided_then_stopped(self, task_id: str) -> None:
        """What alice's cancel does at the rail, without the cancel's own commit."""
        turn = self.alice.tasks.requester.turns.turn_of(
            self.alice.store.get_task(task_id))
        verdict = await self.alice[SIGNER].withdraw(turn)
        assert verdict.refused is None, verdict

    def cancel_meanwhile(self, task_id: str) -> asyncio.Task[dict[str, Any]]:
        """The client's cancel, on its way while the test interleaves a fault with it."""
        return asyncio.create_task(self.alice.tasks.cancel(self.bob.aid, task_id))

    async def cancel_as_the_hub_dies(self, moment: Moment) -> tuple[str, TaskNotCancelable]:
        """A paid task at work, the client's cancel, and the hub SIGKILLed with alice's void
        held at ``moment`` (its answer never comes): the cancel is refused, ``rail-unreachable``
        after her node asked again. The task and the refusal."""
        task_id = await self.ask()
        await asyncio.wait_for(self.worker.started.wait(), HOLD_S)
        hold = self.proxy.hold("void", moment)
        canceling = self.cancel_meanwhile(task_id)
        await hold.until_reached()
        self.hub.kill()
        hold.release()
        await hold.until_closed()
        with pytest.raises(TaskNotCancelable) as refused:
            await canceling
        assert refused.value.reason == "rail-unreachable"
        return task_id, refused.value

    async def restart_hub(self) -> None:
        await asyncio.to_thread(self.hub.start)
        for node in (self.alice, self.bob):
            await eventually(lambda node=node: node.hub.status.state is JoinState.REGISTERED,
                             "the node registered at the restarted hub", RESTART_S)

    async def outcome(self, task_id: str, *, paid: bool) -> None:
        await assert_one_outcome(self.hub.data, self.alice.paths, self.bob.paths, task_id,
                                 paid=paid)
        assert len(self.worker.served) <= 1


@asynccontextmanager
async def race(root: Path, *, no_response_after: str | None = None) -> AsyncIterator[Race]:
    """The hub process, bob and alice through the proxy, alice credited 1.00 USD (and giving
    up on a silent task after ``no_response_after``)."""
    hub = HubProcess(root / "hub", free_port())
    await asyncio.to_thread(hub.start)
    worker = Worker()
    try:
        async with RailProxy(hub.port) as proxy, AsyncExitStack() as stack:
            prepare(root / "bob", modules={"x402": {"prices": PRICES}},
                    node={"name": "bob", "skills": [{"id": SKILL, "name": "Summarize"},
                                                    {"id": DEAR, "name": "Review"}]})
            prepare(root / "alice", modules={"x402": TIERS}, **(
                {"node": {"no_response_after": no_response_after}} if no_response_after else {}))
            bob, alice = await bob_and_credited_alice(
                stack, root, hub, proxy.url, plugins_with(x402_plugin, worker))
            try:
                yield Race(hub, proxy, alice, bob, worker)
            finally:
                worker.finish.set()
    finally:
        hub.stop()


async def test_a_cancel_before_any_payment_voids_nothing_and_moves_nothing(
        tmp_path: Path) -> None:
    async with race(tmp_path) as net:
        task_id = await net.ask(DEAR)  # above every tier: it waits for the operator
        await eventually(lambda: net.alice.tasks.get(None, task_id)["metadata"].get(
            "anet.reason") == "payment_extension_not_activated", "the quote held at alice")
        canceled = await net.alice.tasks.cancel(net.bob.aid, task_id)
        assert canceled["status"]["state"] == CANCELED
        await net.outcome(task_id, paid=False)
        assert net.worker.served == []


async def test_a_cancel_with_the_verify_in_flight_voids_the_payment(tmp_path: Path) -> None:
    async with race(tmp_path) as net:
        hold = net.proxy.hold("verify", Moment.UNSEEN)
        task_id = await net.ask()
        await hold.until_reached()
        canceled = await net.alice.tasks.cancel(net.bob.aid, task_id)
        assert canceled["status"]["state"] == CANCELED
        hold.release(pass_on=True)  # the hub refuses it: voided
        await hold.until_closed()
        await net.outcome(task_id, paid=False)
        assert net.worker.served == []


async def test_a_cancel_while_the_work_runs_voids_the_payment(tmp_path: Path) -> None:
    async with race(tmp_path) as net:
        task_id = await net.ask()
        await asyncio.wait_for(net.worker.started.wait(), HOLD_S)
        await net.alice.tasks.cancel(net.bob.aid, task_id)
        await eventually(lambda: state_of(net.bob, task_id) == CANCELED, "bob stopped")
        net.worker.finish.set()  # the work's end comes after the cancel: nothing settles
        await net.outcome(task_id, paid=False)


async def test_a_cancel_with_the_settle_held_before_the_hub_wins(tmp_path: Path) -> None:
    """The first race of the issue: the payee's settle is on its way, the hub has not seen it;
    the payer voids the payment, the settle that arrives after moves nothing."""
    async with race(tmp_path) as net:
        hold = net.proxy.hold("settle", Moment.UNSEEN)
        task_id = await net.ask()
        net.worker.finish.set()
        await hold.until_reached()
        canceled = await net.alice.tasks.cancel(net.bob.aid, task_id)
        assert canceled["status"]["state"] == CANCELED
        await eventually(lambda: state_of(net.bob, task_id) == CANCELED, "bob stopped")
        hold.release(pass_on=True)
        await hold.until_closed()
        await net.outcome(task_id, paid=False)


async def test_a_cancel_after_the_hub_settled_is_refused_and_the_task_completes(
        tmp_path: Path, quick_retries: None) -> None:
    """The second race of the issue: the hub moved the money and its answer has not reached
    the payee. The cancel is refused (TaskNotCancelableError, ``payment-settled``: through
    the official a2a-sdk client, and on the HTTP+JSON binding); the payee's retry gets the
    original settlement, and the task completes with the receipt on both nodes."""
    async with race(tmp_path) as net:
        hold = net.proxy.hold("settle", Moment.ANSWERED)
        task_id = await net.ask()
        net.worker.finish.set()
        await hold.until_reached()
        endpoint = StateDir.of(net.alice.paths)
        address = endpoint.address_file.read_text().strip()
        headers = {"Authorization": f"Bearer {endpoint.token_file.read_text().strip()}"}
        agent_url = f"http://{address}/a2a/v1/agents/{net.bob.aid}"
        async with httpx.AsyncClient(headers=headers, timeout=30) as http:
            client = await ClientFactory(ClientConfig(
                httpx_client=http, supported_protocol_bindings=["JSONRPC"])
            ).create_from_url(agent_url)
            with pytest.raises(TaskNotCancelableError) as refused:
                await client.cancel_task(CancelTaskRequest(id=task_id))
            await client.close()
            rest = await http.post(f"{agent_url}/rest/tasks/{task_id}:cancel",
                                   headers={"A2A-Version": "1.0"})
        assert refused.value.data["anet.reason"] == "payment-settled", refused.value.data
        assert "completes with its receipt" in str(refused.value.message)
        # A2A 1.0.1 and the official a2a-sdk answer FAILED_PRECONDITION as 400 (1.0.0: 409).
        assert (rest.status_code, rest.json()["error"]["status"]) == (400, "FAILED_PRECONDITION")
        assert rest.json()["error"]["details"][0]["metadata"]["anet.reason"] == "payment-settled"
        assert net.alice.tasks.get(None, task_id)["status"]["state"] == WORKING
        hold.release()  # the answer is lost; bob's next attempt recovers the settlement
        await net.outcome(task_id, paid=True)


async def test_a_cancel_after_the_task_completed_is_refused(tmp_path: Path) -> None:
    async with race(tmp_path) as net:
        task_id = await net.ask()
        net.worker.finish.set()
        await eventually(lambda: state_of(net.alice, task_id) == COMPLETED, "paid and done")
        refused = await net.cancel_refused(task_id)
        assert refused.reason == "task-not-cancelable"
        await net.outcome(task_id, paid=True)


async def test_a_void_whose_cancel_never_left_ends_the_task_at_the_payees_settle(
        tmp_path: Path) -> None:
    """alice voided, then stopped, with bob's settle held before the hub: the rail refuses
    it (``authorization_voided``), bob ends the task canceled, and alice's task follows."""
    async with race(tmp_path) as net:
        hold = net.proxy.hold("settle", Moment.UNSEEN)
        task_id = await net.ask()
        net.worker.finish.set()
        await hold.until_reached()
        await net.alice_voided_then_stopped(task_id)
        hold.release(pass_on=True)
        await eventually(lambda: state_of(net.alice, task_id) == CANCELED,
                         "alice's task canceled by bob's update")
        received = net.bob.tasks.received(task_id)
        assert received is not None
        metadata = received["status"]["message"]["metadata"]
        assert metadata["x402.payment.error"] == "authorization_voided"
        assert received["metadata"]["anet.reason"] == "canceled_by_requester"
        assert "artifacts" not in received
        await net.outcome(task_id, paid=False)


async def test_a_void_whose_cancel_never_left_ends_the_task_at_the_payees_verify(
        tmp_path: Path) -> None:
    async with race(tmp_path) as net:
        hold = net.proxy.hold("verify", Moment.UNSEEN)
        task_id = await net.ask()
        await hold.until_reached()
        await net.alice_voided_then_stopped(task_id)
        hold.release(pass_on=True)
        await eventually(lambda: state_of(net.alice, task_id) == CANCELED,
                         "alice's task canceled by bob's update")
        await net.outcome(task_id, paid=False)
        assert net.worker.served == []


async def test_a_cancel_while_the_hub_is_down_is_refused_and_the_task_goes_on(
        tmp_path: Path) -> None:
    """The hub SIGKILLed with alice's void on its way to it: her node asks again, finds no
    rail, and refuses the cancel (``rail-unreachable``); nothing changed. After the restart
    the work ends, settles, and the task completes with its receipt."""
    async with race(tmp_path) as net:
        task_id, _ = await net.cancel_as_the_hub_dies(Moment.UNSEEN)
        assert state_of(net.alice, task_id) not in TERMINAL  # nothing changed
        await net.restart_hub()
        net.worker.finish.set()
        await net.outcome(task_id, paid=True)


async def test_a_void_whose_answer_was_lost_is_asked_again_and_the_cancel_wins(
        tmp_path: Path) -> None:
    """The hub voided and its answer was lost on the way: alice's node asks again (a void
    again answers the first decision) and the cancel takes effect; the work's end settles
    nothing."""
    async with race(tmp_path) as net:
        task_id = await net.ask()
        await asyncio.wait_for(net.worker.started.wait(), HOLD_S)
        hold = net.proxy.hold("void", Moment.ANSWERED)
        canceling = net.cancel_meanwhile(task_id)
        await hold.until_reached()
        hold.release()  # the answer is dropped
        canceled = await canceling
        assert canceled["status"]["state"] == CANCELED
        await eventually(lambda: state_of(net.bob, task_id) == CANCELED, "bob stopped")
        net.worker.finish.set()
        await net.outcome(task_id, paid=False)


async def test_the_hub_killed_after_it_voided_ends_the_task_canceled_at_the_payees_settle(
        tmp_path: Path) -> None:
    """The hub SIGKILLed after it committed alice's void, before she heard it: her cancel is
    refused (``rail-unreachable``: the rail may have taken the void); after the restart bob's
    settle finds the void, bob ends the task canceled, and alice's task follows. Nothing
    moved, and a cancel asked again is answered as the task now is."""
    async with race(tmp_path) as net:
        task_id, refused = await net.cancel_as_the_hub_dies(Moment.ANSWERED)
        assert "ends canceled if the rail took the void" in refused.message
        await net.restart_hub()
        net.worker.finish.set()
        await eventually(lambda: state_of(net.alice, task_id) == CANCELED,
                         "alice's task canceled by bob's update", RESTART_S)
        await net.outcome(task_id, paid=False)
        assert (await net.cancel_refused(task_id)).reason == "task-not-cancelable"


async def test_a_silent_paid_task_is_given_up_only_once_its_payment_is_void(
        tmp_path: Path) -> None:
    """alice hears nothing while bob works: before she fails the task (``no_response``) her
    node voids the payment; bob's settle afterwards moves nothing and ends his task canceled."""
    async with race(tmp_path, no_response_after="1s") as net:
        task_id = await net.ask()
        await asyncio.wait_for(net.worker.started.wait(), HOLD_S)
        await eventually(lambda: state_of(net.alice, task_id) == "TASK_STATE_FAILED",
                         "alice gave up on the silent task")
        assert net.alice.tasks.get(None, task_id)["metadata"]["anet.reason"] == "no_response"
        net.worker.finish.set()
        await eventually(lambda: state_of(net.bob, task_id) == CANCELED,
                         "bob's settle found the void")
        await net.outcome(task_id, paid=False)


async def test_a_silent_task_whose_payment_settled_is_not_given_up(tmp_path: Path) -> None:
    """The hub settled and bob has not heard it: alice hears nothing for longer than her
    ``no_response_after``, her node finds the payment settled and keeps waiting; the task
    completes with its receipt once bob's retry recovers the settlement."""
    async with race(tmp_path, no_response_after="1s") as net:
        hold = net.proxy.hold("settle", Moment.ANSWERED)
        task_id = await net.ask()
        net.worker.finish.set()
        await hold.until_reached()
        await eventually(lambda: any(record["outcome"] == "settled" for record in
                                     chain_records(net.alice.paths, task_id, "payment.void")),
                         "alice's silence check found the payment settled", RESTART_S)
        assert state_of(net.alice, task_id) not in TERMINAL
        hold.release()
        await net.outcome(task_id, paid=True)
