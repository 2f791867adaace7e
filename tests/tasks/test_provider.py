"""Provider-side rules over the in-process relay: strangers and modules under each policy,
policy vetoes, follow-ups after a restart, and keep-alives (``task.alive``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from anet_core import hookimpl
from anet_core.records import InboundTask, PolicyVeto, TaskClaim
from anet_core.tasks import InboundPolicy, Responder, TaskError, alive
from anet_core.wire import TaskState
from tests.support.fakes import FakeHub
from tests.support.messages import user_message
from tests.support.nodes import open_node, plugins_with
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(60)

COMPLETED = "TASK_STATE_COMPLETED"


def state(node, task_id: str) -> str:
    return node.tasks.get(None, task_id)["status"]["state"]


class StrangerDesk:
    """Serves strangers' tasks of the skill ``public`` only; records what it was offered."""

    def __init__(self) -> None:
        self.offered: list[InboundTask] = []

    @hookimpl
    def anet_take_task(self, node, task: InboundTask) -> TaskClaim | None:
        self.offered.append(task)
        if task.skill != "public":
            return None

        async def serve(task: InboundTask, responder: Responder) -> None:
            await responder.complete(f"hello stranger ({task.trusted})")

        return TaskClaim(module="desk", serve=serve)

    @hookimpl
    def anet_policy_veto(self, node, policy: InboundPolicy) -> PolicyVeto | None:
        if policy is InboundPolicy.OPEN:
            return PolicyVeto(module="desk", reason="modules.desk.public serves strangers",
                              hint="unset modules.desk.public")
        return None


async def test_a_strangers_task_is_accepted_only_when_a_module_claims_it(tmp_path: Path,
                                                                         hub: FakeHub) -> None:
    desk = StrangerDesk()
    async with open_node(tmp_path / "a", hub) as a, \
            open_node(tmp_path / "b", hub, plugins=plugins_with(desk)) as b:
        served = await a.tasks.send(b.aid, user_message("hi", "m-1"), skill="public")
        await eventually(lambda: state(a, served["id"]) == COMPLETED)
        done = a.tasks.get(None, served["id"])
        assert done["status"]["message"]["parts"] == [{"text": "hello stranger (False)"}]
        assert done["metadata"]["anet.receipt_verified"] is True
        assert desk.offered[0].trusted is False and desk.offered[0].continued is False

        refused = await a.tasks.send(b.aid, user_message("and this?", "m-2"))
        await eventually(lambda: state(a, refused["id"]) == "TASK_STATE_REJECTED")
        assert a.tasks.get(None, refused["id"])["metadata"]["anet.reason"] == "not_trusted"
        assert b.tasks.inbox() == []

        b.tasks.set_policy("closed")  # closed: not even offered to the modules
        offered = len(desk.offered)
        closed = await a.tasks.send(b.aid, user_message("closed?", "m-3"), skill="public")
        await eventually(lambda: state(a, closed["id"]) == "TASK_STATE_REJECTED")
        assert a.tasks.get(None, closed["id"])["metadata"]["anet.reason"] == "rejected_by_policy"
        assert len(desk.offered) == offered


async def test_a_vetoed_policy_stops_the_start(tmp_path: Path, hub: FakeHub) -> None:
    async with open_node(tmp_path / "b", hub) as b:
        b.tasks.set_policy("open")
    with pytest.raises(TaskError) as refused:
        async with open_node(tmp_path / "b", hub, plugins=plugins_with(StrangerDesk())):
            pass
    assert "inbound policy open is refused: modules.desk.public" in refused.value.message
    assert "anet policy set trusted" in (refused.value.hint or "")


async def test_a_failing_veto_check_keeps_the_policy(tmp_path: Path, hub: FakeHub) -> None:
    class Broken:
        @hookimpl
        def anet_policy_veto(self, node, policy):
            raise RuntimeError("boom")

    async with open_node(tmp_path / "b", hub, plugins=plugins_with(Broken())) as b:
        with pytest.raises(TaskError, match="a module's check failed: RuntimeError: boom"):
            b.tasks.set_policy("open")
        assert b.tasks.policy.value == "trusted"
        assert b.tasks.set_policy("closed").value == "closed"  # closing stays possible


class Asker:
    """Asks a question and waits for the answer (a backend that holds the task); after a restart
    the answer comes back through ``anet_take_task`` with ``continued``."""

    def __init__(self, *, claim_follow_ups: bool = True) -> None:
        self.claim_follow_ups = claim_follow_ups
        self.offered: list[InboundTask] = []

    @hookimpl
    def anet_take_task(self, node, task: InboundTask) -> TaskClaim | None:
        self.offered.append(task)
        if task.continued and not self.claim_follow_ups:
            return None

        async def serve(task: InboundTask, responder: Responder) -> None:
            if task.continued:
                await responder.complete(f"resumed with {task.message['parts'][0]['text']}")
                return
            await responder.input_required("which colour?")
            await responder.next_message()
            raise AssertionError("the node stops before the answer comes")

        return TaskClaim(module="asker", serve=serve)


@pytest.mark.parametrize("claimed", [True, False], ids=["claimed", "unclaimed"])
async def test_a_follow_up_after_a_restart_is_offered_to_the_modules(
        tmp_path: Path, hub: FakeHub, claimed: bool) -> None:
    asker = Asker(claim_follow_ups=claimed)
    plugins = plugins_with(asker)
    async with open_node(tmp_path / "a", hub) as a:
        async with open_node(tmp_path / "b", hub, plugins=plugins) as b:
            b.tasks.trust(a.aid)
            task = await a.tasks.send(b.aid, user_message("paint it", "m-1"))
            await eventually(lambda: state(a, task["id"]) == "TASK_STATE_INPUT_REQUIRED")
        async with open_node(tmp_path / "b", hub, plugins=plugins) as b:
            # the input-required task is not an orphan: it stays out of the inbox
            assert b.tasks.inbox() == []
            await a.tasks.send(b.aid, user_message("blue", "m-2", taskId=task["id"]))
            if claimed:
                await eventually(lambda: state(a, task["id"]) == COMPLETED)
                done = a.tasks.get(None, task["id"])
                assert done["status"]["message"]["parts"] == [{"text": "resumed with blue"}]
                assert b.tasks.inbox() == []
                served = b.store.get_task(task["id"])  # b keeps the answer it resumed with
                assert served is not None and served.served_by == "asker"
                assert [m["parts"][0]["text"] for m in served.task["history"]] == [
                    "paint it", "which colour?", "blue", "resumed with blue"]
            else:
                inbox = await eventually(lambda: b.tasks.inbox())
                assert [m["parts"][0]["text"] for m in inbox[0]["history"]] == [
                    "paint it", "which colour?", "blue"]
                await eventually(lambda: a.tasks.get(None, task["id"])["metadata"].get(
                    "anet.reason") == "queued_for_operator")
    follow_up = asker.offered[-1]
    assert follow_up.continued and follow_up.task_id == task["id"]
    assert follow_up.context_id == task["contextId"] and follow_up.trusted
    assert follow_up.message["messageId"] == "m-2"


async def test_a_module_that_returns_while_asking_leaves_the_answer_to_the_operator(
        tmp_path: Path, hub: FakeHub) -> None:
    class AsksAndLeaves:
        offered = 0

        @hookimpl
        def anet_take_task(self, node, task):
            self.offered += 1

            async def serve(task, responder):
                await responder.input_required("ask the operator")

            return TaskClaim(module="leaves", serve=serve)

    module = AsksAndLeaves()
    async with open_node(tmp_path / "a", hub) as a, \
            open_node(tmp_path / "b", hub, plugins=plugins_with(module)) as b:
        b.tasks.trust(a.aid)
        task = await a.tasks.send(b.aid, user_message("hi", "m-1"))
        await eventually(lambda: state(a, task["id"]) == "TASK_STATE_INPUT_REQUIRED")
        await asyncio.sleep(0.05)  # serve() has returned
        await a.tasks.send(b.aid, user_message("answer", "m-2", taskId=task["id"]))
        await eventually(lambda: b.tasks.inbox())
        assert module.offered == 1


async def test_keep_alives_hold_a_waiting_task_without_changing_it(
        tmp_path: Path, hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(alive, "ALIVE_INTERVAL_S", 0.1)
    async with open_node(tmp_path / "a", hub, no_response_after="600ms") as a, \
            open_node(tmp_path / "b", hub) as b:
        b.tasks.trust(a.aid)
        tasks = [await a.tasks.send(b.aid, user_message(f"wait {n}", f"m-{n}")) for n in range(3)]
        await eventually(lambda: len(b.tasks.inbox()) == 3)
        await eventually(lambda: all(a.tasks.get(None, t["id"])["metadata"]["anet.state_seq"] == 1
                                     for t in tasks))
        to_a = len([e for e in hub.seen if e["to"] == a.aid])
        subscription = a.tasks.subscribe(b.aid, tasks[0]["id"])
        await asyncio.sleep(1.5)  # well past no_response_after: only keep-alives came
        for task in tasks:
            held = a.tasks.get(None, task["id"])
            assert held["status"]["state"] == "TASK_STATE_SUBMITTED"
            assert held["metadata"]["anet.state_seq"] == 1
            assert held["metadata"]["anet.reason"] == "queued_for_operator"
        keep_alives = len([e for e in hub.seen if e["to"] == a.aid]) - to_a
        assert 5 <= keep_alives <= 20  # one envelope per interval for all three tasks, not three
        events = aiter(subscription)
        assert "task" in await anext(events)
        with pytest.raises(TimeoutError):  # no event: a keep-alive is not a change
            await asyncio.wait_for(anext(events), 0.05)

        await b.tasks.reply(tasks[0]["id"], "done")
        await eventually(lambda: state(a, tasks[0]["id"]) == COMPLETED)
        monkeypatch.setattr(b.hub, "send", _dropped)  # b goes silent: a fails the others
        await eventually(lambda: state(a, tasks[1]["id"]) == "TASK_STATE_FAILED", timeout=5)
        assert a.tasks.get(None, tasks[1]["id"])["metadata"]["anet.reason"] == "no_response"


async def _dropped(envelope) -> None:
    return None


async def test_a_keep_alive_only_touches_the_senders_waiting_tasks(tmp_path: Path,
                                                                   hub: FakeHub) -> None:
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b, \
            open_node(tmp_path / "c", hub) as c:
        b.tasks.trust(a.aid)
        task = await a.tasks.send(b.aid, user_message("wait", "m-1"))
        await eventually(lambda: b.tasks.inbox())
        await eventually(lambda: a.tasks.get(None, task["id"])["metadata"]["anet.state_seq"] == 1)
        stored = a.store.get_task(task["id"])
        with a.store.transaction():
            stored.last_heard_at -= 100
            a.store.save_task(stored)
        before = a.store.get_task(task["id"]).last_heard_at
        assert await c.tasks.alive.send() == 0  # c holds no task of a
        # c names a's task anyway: it is not c's, nothing moves
        from anet_core.protocol.envelope import seal
        from anet_core.protocol.tasks import AliveTask, TaskAlive, wire_body
        body = wire_body(TaskAlive(tasks=[AliveTask(task_id=task["id"],
                                                    context_id=task["contextId"])]))
        await c.hub.send(seal(c.identity, a.aid, a.identity.encryption_public_key, body))
        await asyncio.sleep(0.2)
        assert a.store.get_task(task["id"]).last_heard_at == before
        assert await b.tasks.alive.send() == 1
        await eventually(lambda: a.store.get_task(task["id"]).last_heard_at > before)
        assert a.tasks.get(None, task["id"])["metadata"]["anet.state_seq"] == 1
        # a terminal task is not named
        await b.tasks.reply(task["id"], "done")
        await eventually(lambda: state(a, task["id"]) == COMPLETED)
        assert await b.tasks.alive.send() == 0
        assert TaskState(state(a, task["id"])) is TaskState.TASK_STATE_COMPLETED


async def test_a_reason_from_a_newer_provider_is_kept_and_a_malformed_one_refused(
        tmp_path: Path, hub: FakeHub) -> None:
    """A provider's ``anet.reason`` this node does not know (a newer version's) is shown as it
    came; an update whose reason is no word of that form is refused, and changes nothing."""
    from anet_core.protocol.envelope import seal
    from anet_core.protocol.tasks import TaskUpdate, wire_body

    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        b.tasks.trust(a.aid)
        task = await a.tasks.send(b.aid, user_message("wait", "m-1"))
        await eventually(lambda: a.tasks.get(None, task["id"])["metadata"]["anet.state_seq"] == 1)

        async def update(seq: int, reason: str) -> None:
            body = wire_body(TaskUpdate(task_id=task["id"], context_id=task["contextId"],
                                        state_seq=seq, status={"state": "TASK_STATE_WORKING"}))
            await b.hub.send(seal(b.identity, a.aid, a.identity.encryption_public_key,
                                  body | {"reason": reason}))

        await update(2, "waiting_for_a_gpu")
        await eventually(lambda: a.tasks.get(None, task["id"])["metadata"].get("anet.reason")
                         == "waiting_for_a_gpu", "the newer reason shown")
        for seq, malformed in enumerate(["Waiting For A GPU", "x" * 65, "7th"], start=3):
            await update(seq, malformed)
        await update(3, "queued_for_operator")  # the same stateSeq, well-formed: taken
        await eventually(lambda: a.tasks.get(None, task["id"])["metadata"]["anet.state_seq"] == 3)
        shown = a.tasks.get(None, task["id"])
    assert shown["metadata"]["anet.reason"] == "queued_for_operator"
    assert shown["status"]["state"] == "TASK_STATE_WORKING"
