"""The requester's turn hooks between two real nodes over the in-process relay: a module answers
the agent's question itself, holds a client's answer, and one turn per task runs at a time."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from anet_core import hookimpl
from anet_core.node import Node
from anet_core.protocol.tasks import Reason
from anet_core.records import (
    CancelCheck,
    CancelVerdict,
    InboundTask,
    TaskClaim,
    TurnAnswer,
    TurnHandler,
)
from anet_core.tasks import TaskError, TaskNotCancelable
from anet_core.wire import TaskState
from tests.support.fakes import FakeHub
from tests.support.messages import user_message
from tests.support.nodes import open_node, plugins_with
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(60)

ASKS = {"greeter.asks": "name"}


class AsksForAName:
    """The remote agent: asks for a name (question metadata ``greeter.asks``), then completes
    with what it got; ``answers`` keeps every answer it received."""

    def __init__(self) -> None:
        self.answers: list[dict[str, Any]] = []

    @hookimpl
    def anet_take_task(self, node, task: InboundTask) -> TaskClaim:
        async def serve(task: InboundTask, responder: Any) -> None:
            await responder.input_required({"parts": [{"text": "your name?"}],
                                            "metadata": ASKS})
            answer = await responder.next_message()
            self.answers.append(answer)
            await responder.complete(artifacts=[f"hello {answer['parts'][0]['text']}"])

        return TaskClaim(module="scenario", serve=serve)


@asynccontextmanager
async def requester_and_agent(tmp_path: Path, module: object
                              ) -> AsyncIterator[tuple[Node, Node, AsksForAName]]:
    """Node a with ``module``, node b serving :class:`AsksForAName` and trusting a."""
    hub, agent = FakeHub(), AsksForAName()
    async with open_node(tmp_path / "a", hub, plugins=plugins_with(module)) as a, \
            open_node(tmp_path / "b", hub, plugins=plugins_with(agent)) as b:
        b.tasks.trust(a.aid)
        yield a, b, agent


def state(node, task_id: str) -> str:
    return str(node.tasks.get(None, task_id)["status"]["state"])


async def test_hook_anet_requester_waiting(tmp_path: Path) -> None:
    turns: list[Any] = []

    class AnswersForTheClient:
        @hookimpl
        def anet_requester_waiting(self, node, turn):
            question = turn.task["status"].get("message") or {}
            if question.get("metadata", {}).get("greeter.asks") != "name":
                return None

            async def run(turn):
                turns.append(turn)
                return TurnAnswer(send={"messageId": f"name-{turn.task_id}",
                                        "role": "ROLE_USER", "parts": [{"text": "Ada"}]},
                                  evidence=(("greeter.answered", {"taskId": turn.task_id}),))
            return TurnHandler(module="greeter", run=run)

    async with requester_and_agent(tmp_path, AnswersForTheClient()) as (a, b, agent):
        sent = await a.tasks.send(b.aid, user_message("hi") | {"extensions": ["urn:x"]})
        subscription = a.tasks.subscribe(b.aid, sent["id"])
        await eventually(lambda: state(a, sent["id"]) == "TASK_STATE_COMPLETED")
        seen = [event async for event in subscription]
        done = a.tasks.get(None, sent["id"])
        chain = tmp_path / "a" / "evidence" / "chain.jsonl"
        await eventually(lambda: chain.exists() and "greeter.answered" in chain.read_text(),
                         "the turn's record")
    assert done["artifacts"][0]["parts"] == [{"text": "hello Ada"}]
    assert [answer["messageId"] for answer in agent.answers] == [f"name-{sent['id']}"]
    assert turns[0].message is None and turns[0].extensions == frozenset({"urn:x"})
    # The question was answered before the client heard of it: its stream never stops there.
    states = [event["statusUpdate"]["status"]["state"] for event in seen
              if "statusUpdate" in event]
    assert TaskState.TASK_STATE_INPUT_REQUIRED.value not in states
    assert len([line for line in chain.read_text().splitlines()
                if "greeter.answered" in line]) == 1


async def test_hook_anet_requester_answer(tmp_path: Path) -> None:
    running = 0
    overlapped = False

    class RefusesPasswords:
        @hookimpl
        def anet_requester_answer(self, node, turn):
            text = turn.message["parts"][0].get("text", "")

            async def run(turn):
                nonlocal running, overlapped
                running += 1
                overlapped |= running > 1
                await asyncio.sleep(0.05)
                running -= 1
                if "password" in text:
                    return TurnAnswer(hold=Reason.REJECTED_BY_POLICY, status={
                        "messageId": f"refused-{turn.task_id}",
                        "parts": [{"text": "no passwords"}]})
                return TurnAnswer(send=turn.message | {"parts": [{"text": text.upper()}]})
            return TurnHandler(module="greeter", run=run)

    async with requester_and_agent(tmp_path, RefusesPasswords()) as (a, b, agent):
        sent = await a.tasks.send(b.aid, user_message("hi"))
        await eventually(lambda: state(a, sent["id"]) == "TASK_STATE_INPUT_REQUIRED")
        ids = {"taskId": sent["id"], "contextId": sent["contextId"]}
        held = await a.tasks.send(b.aid, user_message("my password", "m-2") | ids)
        assert held["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert held["metadata"]["anet.reason"] == "rejected_by_policy"
        assert held["status"]["message"]["parts"] == [{"text": "no passwords"}]
        assert held["status"]["message"]["role"] == "ROLE_AGENT"
        # Two answers at once: one turn at a time, the second finds the task moved on.
        results = await asyncio.gather(
            a.tasks.send(b.aid, user_message("ada", "m-3") | ids),
            a.tasks.send(b.aid, user_message("bob", "m-4") | ids), return_exceptions=True)
        await eventually(lambda: state(a, sent["id"]) == "TASK_STATE_COMPLETED")
    assert not overlapped
    assert [answer["parts"][0]["text"] for answer in agent.answers] == ["ADA"]
    refused = [result for result in results if isinstance(result, Exception)]
    assert len(refused) == 1  # moved on: submitted, or already completed
    assert getattr(refused[0], "reason", "") in {"task-not-waiting", "task-terminal"}


async def test_a_client_subscribing_during_the_waiting_turn_does_not_see_the_question(
        tmp_path: Path) -> None:
    started, release = asyncio.Event(), asyncio.Event()

    class AnswersSlowly:
        @hookimpl
        def anet_requester_waiting(self, node, turn):
            async def run(turn):
                started.set()
                await release.wait()
                return TurnAnswer(send={"messageId": f"name-{turn.task_id}",
                                        "role": "ROLE_USER", "parts": [{"text": "Ada"}]})
            return TurnHandler(module="greeter", run=run)

    async with requester_and_agent(tmp_path, AnswersSlowly()) as (a, b, agent):
        sent = await a.tasks.send(b.aid, user_message("hi"))
        await asyncio.wait_for(started.wait(), 10)
        assert state(a, sent["id"]) == "TASK_STATE_INPUT_REQUIRED"  # stored: the agent asked
        subscription = a.tasks.subscribe(b.aid, sent["id"])
        # The client has not heard the question: the module answers it first.
        assert subscription.snapshot["status"]["state"] == "TASK_STATE_WORKING"
        release.set()
        seen = [event async for event in subscription]
    states = [event["statusUpdate"]["status"]["state"] for event in seen
              if "statusUpdate" in event]
    assert TaskState.TASK_STATE_INPUT_REQUIRED.value not in states
    assert states[-1] == TaskState.TASK_STATE_COMPLETED.value


async def test_a_client_subscribing_while_a_hold_is_recorded_sees_the_hold(
        tmp_path: Path) -> None:
    """The turn's commit is flushed before its events go out: a client that subscribes in
    between must find the held question in its snapshot, or it never hears of it (a blocking
    send would wait for ever)."""
    flushing, release = asyncio.Event(), asyncio.Event()

    class Holds:
        @hookimpl
        def anet_requester_waiting(self, node, turn):
            async def run(turn):
                return TurnAnswer(hold=Reason.NEEDS_OPERATOR_APPROVAL,
                                  evidence=[("payment.refuse", {"taskId": turn.task_id})])
            return TurnHandler(module="greeter", run=run)

    async with requester_and_agent(tmp_path, Holds()) as (a, b, agent):
        keep, flush = a.evidence.keep, a.store.flush
        held = False

        def noting_keep(items):  # type: ignore[no-untyped-def]  # in the hold's transaction
            nonlocal held
            held = held or any(kind == "payment.refuse" for kind, _ in items)
            return keep(items)

        async def slow_flush() -> None:  # the hold's commit, on its way to the disk
            if held and not release.is_set():
                flushing.set()
                await release.wait()
            await flush()

        a.evidence.keep = noting_keep  # type: ignore[method-assign]
        a.store.flush = slow_flush  # type: ignore[method-assign]
        sent = await a.tasks.send(b.aid, user_message("hi"))
        await asyncio.wait_for(flushing.wait(), 10)
        subscription = a.tasks.subscribe(b.aid, sent["id"])
        release.set()
        assert subscription.snapshot["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert subscription.snapshot["metadata"]["anet.reason"] == "needs_operator_approval"


async def test_a_hold_on_the_first_message_rejects_the_task_and_sends_nothing(
        tmp_path: Path) -> None:
    class RefusesPasswords:
        @hookimpl
        def anet_requester_answer(self, node, turn):
            if "password" not in turn.message["parts"][0].get("text", ""):
                return None

            async def run(turn):
                assert turn.task["status"]["state"] == "TASK_STATE_SUBMITTED"
                return TurnAnswer(hold=Reason.REJECTED_BY_POLICY, status={
                    "messageId": f"refused-{turn.task_id}", "parts": [{"text": "no passwords"}]},
                    evidence=(("greeter.refused", {"taskId": turn.task_id}),))
            return TurnHandler(module="greeter", run=run)

    async with requester_and_agent(tmp_path, RefusesPasswords()) as (a, b, agent):
        message = user_message("my password", "m-1") | {"contextId": "c-1"}
        refused = await a.tasks.send(b.aid, message)
        again = await a.tasks.send(b.aid, message)  # a repeat: the same task, asked no more
        fine = await a.tasks.send(b.aid, user_message("hi"))
        await eventually(lambda: state(a, fine["id"]) == "TASK_STATE_INPUT_REQUIRED")
        assert b.tasks.received(refused["id"]) is None
        chain = tmp_path / "a" / "evidence" / "chain.jsonl"
        await eventually(lambda: chain.exists() and "greeter.refused" in chain.read_text(),
                         "the turn's record")
    assert refused["status"]["state"] == "TASK_STATE_REJECTED" and again["id"] == refused["id"]
    assert refused["metadata"]["anet.reason"] == "rejected_by_policy"
    assert refused["status"]["message"]["parts"] == [{"text": "no passwords"}]
    assert not any("task.forwarded" in line and refused["id"] in line
                   for line in chain.read_text().splitlines())


async def test_hook_anet_requester_cancel(tmp_path: Path) -> None:
    """A module refuses the first cancel with its reason (the task goes on, the agent hears
    nothing), and lets the second through; a check that fails refuses the cancel too; no
    other turn of the task runs while the check does."""
    verdicts = [CancelVerdict(refused="booking-confirmed", message="the booking is confirmed",
                              hint="ask the agent to undo it"),
                RuntimeError("the booking service is down"),
                CancelVerdict(evidence=(("greeter.unbooked", {"taskId": "?"}),))]
    checking = asyncio.Event()
    release = asyncio.Event()
    turns: list[Any] = []

    class Bookings:
        @hookimpl
        def anet_requester_cancel(self, node, turn):
            async def run(turn):
                turns.append(turn)
                checking.set()
                await release.wait()
                verdict = verdicts.pop(0)
                if isinstance(verdict, Exception):
                    raise verdict
                return verdict
            return CancelCheck(module="greeter", run=run)

        @hookimpl
        def anet_requester_answer(self, node, turn):
            async def run(turn):
                assert not checking.is_set(), "an answer turn ran during the cancel's check"
                return TurnAnswer()
            return TurnHandler(module="greeter", run=run)

    async with requester_and_agent(tmp_path, Bookings()) as (a, b, agent):
        sent = await a.tasks.send(b.aid, user_message("hi"))
        await eventually(lambda: state(a, sent["id"]) == "TASK_STATE_INPUT_REQUIRED")
        release.set()
        with pytest.raises(TaskNotCancelable) as refused:
            await a.tasks.cancel(b.aid, sent["id"])
        assert (refused.value.reason, refused.value.hint) == ("booking-confirmed",
                                                               "ask the agent to undo it")
        with pytest.raises(TaskNotCancelable) as failed:
            await a.tasks.cancel(b.aid, sent["id"])
        assert failed.value.reason == "task-not-cancelable"
        assert "RuntimeError" in failed.value.message
        assert state(a, sent["id"]) == "TASK_STATE_INPUT_REQUIRED"
        # The check holds the task's turn: an answer sent meanwhile waits for it.
        checking.clear()
        release.clear()
        canceling = asyncio.create_task(a.tasks.cancel(b.aid, sent["id"]))
        await asyncio.wait_for(checking.wait(), 10)
        ids = {"taskId": sent["id"], "contextId": sent["contextId"]}
        answering = asyncio.create_task(a.tasks.send(b.aid, user_message("ada", "m-2") | ids))
        await asyncio.sleep(0.05)
        assert not answering.done()
        release.set()
        canceled = await canceling
        checking.clear()
        with pytest.raises(TaskError) as late:
            await answering
        assert late.value.reason == "task-terminal"
        await eventually(lambda: b.tasks.received(sent["id"])["status"]["state"]
                         == "TASK_STATE_CANCELED", "the agent asked to stop")
        chain = tmp_path / "a" / "evidence" / "chain.jsonl"
        await eventually(lambda: chain.exists() and "greeter.unbooked" in chain.read_text(),
                         "the check's record")
    assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
    assert [turn.message for turn in turns] == [None, None, None]
    assert {turn.task_id for turn in turns} == {sent["id"]}
    assert agent.answers == []


async def test_hook_anet_requester_ended(tmp_path: Path) -> None:
    """Each module's records of the agent's end are kept with it, also for a task that ended
    here first (canceled) and that the agent completed after all; a module that fails records
    nothing and stops nothing."""
    ended: list[Any] = []
    finish = asyncio.Event()

    class Books:
        @hookimpl
        def anet_requester_ended(self, node, turn):
            ended.append(turn)
            return [("greeter.ended", {"taskId": turn.task_id,
                                       "state": turn.task["status"]["state"]})]

    class Fails:
        @hookimpl
        def anet_requester_ended(self, node, turn):
            raise RuntimeError("a broken module")

    class FinishesWhenTold:
        @hookimpl
        def anet_take_task(self, node, task):
            async def serve(task, responder):
                if task.message["parts"][0]["text"] == "slow":
                    await finish.wait()
                await responder.complete(artifacts=["done"])
            return TaskClaim(module="agent", serve=serve)

    hub = FakeHub()
    async with open_node(tmp_path / "a", hub, plugins=plugins_with(Books(), Fails())) as a, \
            open_node(tmp_path / "b", hub, plugins=plugins_with(FinishesWhenTold())) as b:
        b.tasks.trust(a.aid)
        fast = await a.tasks.send(b.aid, user_message("fast"))
        await eventually(lambda: state(a, fast["id"]) == "TASK_STATE_COMPLETED")
        slow = await a.tasks.send(b.aid, user_message("slow", "m-2"))
        await eventually(lambda: b.tasks.received(slow["id"]) is not None, "b works on it")
        receiver = hub.receivers.pop(b.aid)  # the cancel waits at the hub: b finishes first
        await a.tasks.cancel(b.aid, slow["id"])
        finish.set()
        chain = tmp_path / "a" / "evidence" / "chain.jsonl"
        await eventually(lambda: chain.exists() and chain.read_text().count("greeter.ended") == 2,
                         "both ends recorded")
        hub.receivers[b.aid] = receiver
        hub.wake(b.aid)
        assert state(a, slow["id"]) == "TASK_STATE_CANCELED"
    assert [(turn.task_id, turn.task["status"]["state"]) for turn in ended] == [
        (fast["id"], "TASK_STATE_COMPLETED"), (slow["id"], "TASK_STATE_COMPLETED")]
    assert ended[0].message is None
