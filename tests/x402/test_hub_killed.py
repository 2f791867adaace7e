"""The hub SIGKILLed at the worst moments of a paid task: with the payee's verify in flight,
after the settlement was committed in its SQLite before the payee heard it, before the settle
reached its ledger, and with each of the task's envelopes in flight (the quote to the requester,
the payment to the payee, the final update back). Restarted on the same port and data, each
time: no money moved twice, none lost, the task ends (or waits with a reason), and the ledger's
sum is conserved.

A real ``anet hub serve`` process; alice and bob are real nodes in this process, bob (module
x402, a worker serving the priced skill) joined through a loopback proxy (tests/x402/holding_proxy)
that can hold one of his rail requests before or after the hub, so each moment is reached
deterministically and the hub is killed exactly there."""

from __future__ import annotations

import asyncio
import json
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from anet_core.errors import ReasonError
from anet_core.identity import verify_history
from anet_core.link.contract import JoinState
from anet_core.node import Node
from anet_core.protocol.payments import Settlement, verify_settlement
from anet_hub import admin
from anet_x402 import plugin as x402_plugin
from anet_x402.provider import payments_path
from anet_x402.quotes import Payment, PaymentBook
from tests.support.nodes import plugins_with, prepare, running_node
from tests.support.payments import LedgerTotals, assert_ledger_conserved, ledger_totals
from tests.support.processes import HubProcess, free_port
from tests.support.waiting import eventually
from tests.x402.holding_proxy import Hold, Moment, RailProxy
from tests.x402.payee import (
    PRICES,
    SKILL,
    Pair,
    Worker,
    payment,
    quote_of,
    submitted,
)

pytestmark = pytest.mark.timeout(180)

COMPLETED = "TASK_STATE_COMPLETED"
INPUT_REQUIRED = "TASK_STATE_INPUT_REQUIRED"
WORKING = "TASK_STATE_WORKING"
RECOVERY_S = 60.0
HOLD_S = 30.0
INBOUND_LOGGER = "anet_core.tasks.inbound"


class Tripwire:
    """A node's task layer behind a receiver that counts each envelope id it is handed and can
    kill the hub once the task layer kept an envelope, before the link acknowledges it."""

    def __init__(self, node: Node, hub: HubProcess) -> None:
        self.node = node
        self.hub = hub
        self.received: Counter[str] = Counter()
        self.killed: list[str] = []
        self._when: Callable[[dict[str, Any]], bool] | None = None
        node.hub.set_receiver(self)

    def kill_hub_once(self, when: Callable[[dict[str, Any]], bool]) -> None:
        """Kill the hub the first time an envelope kept is one ``when`` picks."""
        self._when = when

    async def __call__(self, envelope: dict[str, Any]) -> None:
        await self.node.tasks.inbound(envelope)
        self.received[envelope["id"]] += 1
        if self._when is not None and not self.killed and self._when(envelope):
            self.killed.append(envelope["id"])
            self.hub.kill()

    async def hub_killed(self) -> str:
        await eventually(lambda: self.killed, "the hub killed with an envelope unacknowledged",
                         RECOVERY_S)
        return self.killed[0]

    async def refused_again(self, caplog: pytest.LogCaptureFixture) -> None:
        """The envelope the hub was killed over came again, and was refused as a replay."""
        envelope_id = self.killed[0]
        await eventually(lambda: self.received[envelope_id] == 2, "the envelope sent again",
                         RECOVERY_S)
        assert any(record.name == INBOUND_LOGGER and "reason=replayed" in record.getMessage()
                   and f"id={envelope_id} " in record.getMessage()
                   for record in caplog.records), f"{envelope_id} not refused as a replay"


def alice_has(net: Network, state: str) -> Callable[[dict[str, Any]], bool]:
    return lambda envelope: bool(net.pair.alice.tasks.list(state=state)["tasks"])


@dataclass
class Network:
    hub: HubProcess
    proxy: RailProxy
    pair: Pair
    worker: Worker

    @property
    def bob(self) -> Node:
        return self.pair.bob

    def ledger(self) -> LedgerTotals:
        return ledger_totals(self.hub.data)

    async def restart_hub(self) -> None:
        await asyncio.to_thread(self.hub.start)
        for node in (self.pair.alice, self.bob):
            await eventually(lambda node=node: node.hub.status.state is JoinState.REGISTERED,
                             "the node registered at the restarted hub", RECOVERY_S)

    def payment_of(self, task_id: str) -> Payment:
        book = PaymentBook(payments_path(self.bob.paths))
        try:
            found = book.get(task_id)
        finally:
            book.close()
        assert found is not None, f"bob has no payment for {task_id}"
        return found

    def bob_state(self, task_id: str) -> str:
        received = self.bob.tasks.received(task_id)
        assert received is not None
        return str(received["status"]["state"])

    def settlement(self, receipt: dict[str, Any]) -> Settlement:
        """The hub's settlement in ``receipt``, verified with the hub's key history (bob's pin
        of it)."""
        pin = json.loads(self.bob.paths.hub_pin.read_text())
        history = verify_history(pin["history"], expected_aid=pin["hubAid"])
        return verify_settlement(receipt["extra"]["settlement"], history)


@asynccontextmanager
async def network(tmp_path: Path) -> AsyncIterator[Network]:
    """A hub process; alice joined there directly, bob (module x402, the worker) through the
    proxy; alice credited with 1.00 USD."""
    hub = HubProcess(tmp_path / "hub" / "data", free_port())
    await asyncio.to_thread(hub.start)
    try:
        async with RailProxy(hub.port) as proxy, AsyncExitStack() as stack:
            worker = Worker()
            prepare(tmp_path / "bob", modules={"x402": {"prices": PRICES}},
                    node={"name": "bob", "description": "bob's agent",
                          "skills": [{"id": SKILL, "name": "Summarize", "description": "",
                                      "tags": []}]})
            alice = await stack.enter_async_context(
                running_node(tmp_path / "alice", hub_url=hub.url))
            bob = await stack.enter_async_context(running_node(
                tmp_path / "bob", plugins_with(x402_plugin, worker), hub_url=proxy.url))
            bob.tasks.trust(alice.aid)
            await asyncio.to_thread(admin.credit, hub.data, alice.aid, "1.00", "USD")
            yield Network(hub, proxy, Pair(alice, bob), worker)
    finally:
        hub.stop()


async def reached(hold: Hold) -> None:
    await hold.until_reached()


async def kill_at(net: Network, hold: Hold) -> None:
    """Kill the hub while ``hold`` keeps its request, then let the request end unanswered."""
    net.hub.kill()
    hold.release()
    await hold.until_closed()


async def unreachable_twice(net: Network, task_id: str) -> None:
    """Until the payee's settle found the rail unreachable, and its deferred retry did again
    (the retry after that must still come)."""
    def unreachable() -> int:
        return sum(receipt["extra"]["attempts"] for receipt in net.payment_of(task_id).receipts
                   if receipt.get("errorReason") == "rail_unreachable")

    await eventually(lambda: unreachable() >= 2, "bob's deferred settle found no rail twice")


async def pay(net: Network, task: dict[str, Any]) -> dict[str, Any]:
    """Alice pays the task's first option (a fresh authorization); returns the option."""
    option = quote_of(net.pair, task["id"])["accepts"][0]
    await net.pair.answer(task, submitted(payment(net.pair, option)))
    return option


def paid_once(net: Network, task_id: str) -> dict[str, Any]:
    """The task completed at alice with the work's result and a receipt of the hub's one
    transfer for it; the ledger conserved; returns that receipt."""
    done = net.pair.task(task_id)
    assert done["status"]["state"] == COMPLETED
    assert done["artifacts"][0]["parts"] == [{"text": "the summary"}]
    metadata = done["status"]["message"]["metadata"]
    assert metadata["x402.payment.status"] == "payment-completed"
    receipt: dict[str, Any] = metadata["x402.payment.receipts"][-1]
    assert receipt["success"] is True
    totals = assert_ledger_conserved(net.hub.data)
    [transfer] = totals.transfers
    settlement = net.settlement(receipt)
    assert (settlement.task, settlement.transaction) == (task_id, transfer.transaction)
    assert totals.balance(net.pair.alice.aid) == 95 and totals.balance(net.bob.aid) == 5
    assert len(net.worker.served) == 1  # the work ran once
    return receipt


async def completed(net: Network, task_id: str) -> None:
    await eventually(lambda: net.pair.state(task_id) == COMPLETED, "the paid task completed",
                     RECOVERY_S)


@pytest.mark.parametrize("moment", list(Moment))
async def test_hub_killed_with_the_payees_verify_in_flight(tmp_path: Path,
                                                           moment: Moment) -> None:
    """Killed before the verify reached it, or after it answered (the payee never heard):
    verify moves nothing; the payee quotes again (``rail_unreachable``) and a new payment after
    the restart goes through."""
    async with network(tmp_path) as net:
        hold = net.proxy.hold("verify", moment)
        task = await net.pair.ask()
        option = await pay(net, task)
        await reached(hold)
        await kill_at(net, hold)
        assert net.ledger().transfers == []
        # The hub is down: bob's task waits for a payment again, with the reason.
        await eventually(lambda: net.bob_state(task["id"]) == INPUT_REQUIRED
                         and "rail_unreachable" in str(net.bob.tasks.received(task["id"])),
                         "bob quoted again")
        assert net.worker.served == []
        await net.restart_hub()
        await eventually(lambda: "rail_unreachable" in str(quote_of(net.pair, task["id"])),
                         "alice has the new quote", RECOVERY_S)
        assert net.pair.state(task["id"]) == INPUT_REQUIRED
        assert quote_of(net.pair, task["id"])["accepts"] == [option]
        await pay(net, task)
        await completed(net, task["id"])
        paid_once(net, task["id"])


async def test_hub_killed_after_it_settled_before_the_payee_heard(
        tmp_path: Path, quick_retries: None) -> None:
    """The transfer is committed in the hub's SQLite and its answer lost with the hub: the
    payee's retries find the rail unreachable, the task's end waits; after the restart the
    retry is answered ``nonce_already_used`` with the original settlement, which the receipt
    carries. One transfer."""
    async with network(tmp_path) as net:
        hold = net.proxy.hold("settle", Moment.ANSWERED)
        task = await net.pair.ask()
        await pay(net, task)
        await reached(hold)
        [committed] = net.ledger().transfers  # the money moved, the payee does not know it
        await kill_at(net, hold)
        await unreachable_twice(net, task["id"])
        assert net.bob_state(task["id"]) == WORKING  # the end waits for the rail
        await net.restart_hub()
        await completed(net, task["id"])
        receipt = paid_once(net, task["id"])
        assert receipt["extra"].get("recovered") is True
        assert receipt["transaction"] == committed.transaction
        # The attempts while the hub was down are one receipt, with their count.
        unreachable, _ = net.pair.status_metadata(task["id"])["x402.payment.receipts"]
        assert unreachable["errorReason"] == "rail_unreachable"
        assert unreachable["extra"]["attempts"] >= 2


async def test_hub_killed_before_the_settle_reached_its_ledger(
        tmp_path: Path, quick_retries: None) -> None:
    """The settle never reached the hub: nothing moved; the deferred settle runs once the hub
    is back, and moves the amount once."""
    async with network(tmp_path) as net:
        hold = net.proxy.hold("settle", Moment.UNSEEN)
        task = await net.pair.ask()
        await pay(net, task)
        await reached(hold)
        await kill_at(net, hold)
        assert net.ledger().transfers == []
        await unreachable_twice(net, task["id"])
        assert net.bob_state(task["id"]) == WORKING
        await net.restart_hub()
        await completed(net, task["id"])
        receipt = paid_once(net, task["id"])
        assert "recovered" not in receipt["extra"]  # settled now, by the deferred settle


async def test_hub_killed_with_the_quote_in_flight(tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """Killed after alice's task layer kept bob's quote, before its acknowledgement reached the
    hub: bob sends the quote again after the restart, alice refuses it as a replay, pays once."""
    async with network(tmp_path) as net:
        alice = Tripwire(net.pair.alice, net.hub)
        alice.kill_hub_once(alice_has(net, INPUT_REQUIRED))
        task = await net.pair.ask()
        await alice.hub_killed()
        await net.restart_hub()
        await alice.refused_again(caplog)
        assert net.pair.state(task["id"]) == INPUT_REQUIRED
        await pay(net, task)
        await completed(net, task["id"])
        paid_once(net, task["id"])


async def test_hub_killed_with_the_payment_in_flight(tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """Killed after bob's task layer kept alice's payment, before its acknowledgement reached
    the hub (alice was never told it was accepted), with bob's verify held before the hub:
    the verify fails, bob quotes again; alice sends the same envelope again after the restart
    (as her outbox does), bob refuses it as a replay; her new payment goes through once."""
    async with network(tmp_path) as net:
        bob = Tripwire(net.bob, net.hub)
        task = await net.pair.ask()
        hold = net.proxy.hold("verify", Moment.UNSEEN)
        option = quote_of(net.pair, task["id"])["accepts"][0]
        _, envelope = await net.pair.sealed(task, submitted(payment(net.pair, option)))
        bob.kill_hub_once(lambda kept: kept["id"] == envelope["id"])
        sending = asyncio.create_task(net.pair.alice.hub.send(envelope))
        await reached(hold)
        assert bob.killed == [envelope["id"]]  # the hub died when bob kept the payment
        hold.release()
        await hold.until_closed()
        with suppress(ReasonError):
            await asyncio.wait_for(sending, RECOVERY_S)  # lost with the hub
        await eventually(lambda: "rail_unreachable" in str(net.bob.tasks.received(task["id"])),
                         "bob quoted again")
        await net.restart_hub()
        await net.pair.alice.hub.send(envelope)  # the same envelope again
        await bob.refused_again(caplog)
        await eventually(lambda: "rail_unreachable" in str(quote_of(net.pair, task["id"])),
                         "alice has the new quote", RECOVERY_S)
        assert net.ledger().transfers == []
        await pay(net, task)
        await completed(net, task["id"])
        paid_once(net, task["id"])


async def test_hub_killed_with_the_final_update_in_flight(tmp_path: Path,
        caplog: pytest.LogCaptureFixture) -> None:
    """Killed after alice's task layer kept the completed task (bob had settled), before its
    acknowledgement reached the hub: bob sends it again after the restart, alice refuses it as
    a replay; one transfer, one receipt."""
    async with network(tmp_path) as net:
        alice = Tripwire(net.pair.alice, net.hub)
        alice.kill_hub_once(alice_has(net, COMPLETED))
        task = await net.pair.ask()
        await pay(net, task)
        await alice.hub_killed()
        assert len(net.ledger().transfers) == 1
        await net.restart_hub()
        await alice.refused_again(caplog)
        receipt = paid_once(net, task["id"])
        assert len(net.pair.status_metadata(task["id"])["x402.payment.receipts"]) == 1
        assert "recovered" not in receipt["extra"]
