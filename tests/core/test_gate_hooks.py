"""The gate hooks (``anet_task_gate``, ``anet_task_ending``) between two nodes over the
in-process relay, and the card's ``charge`` from the skills the modules price."""

from __future__ import annotations

from pathlib import Path

import pytest

from anet_core import hookimpl
from anet_core.evidence import verify
from anet_core.link.card import Charge, card_prices, charge_of, priced_skills
from anet_core.records import (
    EndingTask,
    GateAction,
    GateVerdict,
    SkillSource,
    TaskClaim,
    TaskGate,
)
from tests.support.fakes import FakeHub
from tests.support.messages import user_message
from tests.support.nodes import open_node, plugins_with
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(60)


class Password:
    """Holds the skill ``vault`` until the requester answers ``open sesame``; adds a mark to the
    end of every task it let through."""

    def __init__(self) -> None:
        self.endings: list[EndingTask] = []

    @hookimpl
    def anet_task_gate(self, node, task):
        if task.skill != "vault":
            return None
        if not task.continued:
            return TaskGate(module="password", verdict=GateVerdict(
                GateAction.HOLD, "Say the password.", records=(("vault.asked", {"t": 1}),)))
        if task.question is None or "password" not in task.question["parts"][0]["text"]:
            return None
        said = task.message["parts"][0]["text"]

        async def check():
            if said == "open sesame":
                return GateVerdict(GateAction.PASS, "The vault opens.")
            return GateVerdict(GateAction.FAIL, f"{said!r} is not the password.")

        return TaskGate(module="password", check=check)

    @hookimpl
    def anet_task_ending(self, node, task):
        if task.gate != "password":
            return None
        self.endings.append(task)
        return TaskGate(module="password", verdict=GateVerdict(
            GateAction.PASS, {"parts": [{"text": "closed"}], "metadata": {"vault.closed": True}}))


def state(node, task_id: str) -> str:
    return node.tasks.get(None, task_id)["status"]["state"]


async def held(a, b) -> dict:
    """A task of ``a`` for b's skill ``vault``, waiting for the password."""
    b.tasks.trust(a.aid)
    task = await a.tasks.send(b.aid, user_message("let me in"), skill="vault")
    await eventually(lambda: state(a, task["id"]) == "TASK_STATE_INPUT_REQUIRED")
    return task


async def test_hook_anet_task_gate(tmp_path: Path) -> None:
    hub, gate = FakeHub(), Password()
    async with open_node(tmp_path / "a", hub) as a, \
            open_node(tmp_path / "b", hub, plugins=plugins_with(gate)) as b:
        task = await held(a, b)
        assert b.tasks.inbox() == []  # held: neither a module nor the inbox saw it
        wrong = await a.tasks.send(b.aid, user_message("sesame", "m-2", taskId=task["id"]))
        await eventually(lambda: state(a, wrong["id"]) == "TASK_STATE_FAILED")
        assert "not the password" in a.tasks.get(None, task["id"])["status"]["message"][
            "parts"][0]["text"]
        # The right answer: the first message goes on (to the inbox here), with its metadata.
        second = await a.tasks.send(b.aid, user_message("again"), skill="vault",
                                    metadata={"client": "x"})
        await eventually(lambda: state(a, second["id"]) == "TASK_STATE_INPUT_REQUIRED")
        await a.tasks.send(b.aid, user_message("open sesame", "m-3", taskId=second["id"]))
        inbox = await eventually(lambda: b.tasks.inbox())
        assert inbox[0]["id"] == second["id"] and inbox[0]["status"]["state"] == \
            "TASK_STATE_WORKING"
        received = b.store.get_task(second["id"])
        assert received is not None
        assert received.task["metadata"]["anet.gate"] == "password"
        assert received.task["metadata"]["anet.gate_request"] == {"client": "x"}
        free = await a.tasks.send(b.aid, user_message("no gate", "m-4"), skill="other")
        await eventually(lambda: any(t["id"] == free["id"] for t in b.tasks.inbox()))
    report = verify(tmp_path / "b" / "evidence" / "chain.jsonl", b.identity.verified_history)
    assert report.ok
    assert '"vault.asked"' in (tmp_path / "b" / "evidence" / "chain.jsonl").read_text()


async def test_hook_anet_task_ending(tmp_path: Path) -> None:
    hub, gate = FakeHub(), Password()
    async with open_node(tmp_path / "a", hub) as a, \
            open_node(tmp_path / "b", hub, plugins=plugins_with(gate)) as b:
        task = await held(a, b)
        await a.tasks.send(b.aid, user_message("open sesame", "m-2", taskId=task["id"]))
        await eventually(lambda: b.tasks.inbox())
        await b.tasks.reply(task["id"], "the gold")
        await eventually(lambda: state(a, task["id"]) == "TASK_STATE_COMPLETED")
        done = a.tasks.get(None, task["id"])
        assert done["status"]["message"]["metadata"] == {"vault.closed": True}
        assert done["artifacts"][0]["parts"] == [{"text": "the gold"}]
        assert done["metadata"]["anet.receipt_verified"] is True
        assert [(ending.state, ending.artifacts[0]["parts"]) for ending in gate.endings] == [
            ("TASK_STATE_COMPLETED", [{"text": "the gold"}])]
        # A task no gate admitted ends without asking one.
        free = await a.tasks.send(b.aid, user_message("no gate", "m-3"))
        await eventually(lambda: b.tasks.inbox())
        await b.tasks.reply(free["id"], "plain")
        await eventually(lambda: state(a, free["id"]) == "TASK_STATE_COMPLETED")
        assert len(gate.endings) == 1


class Stamp:
    """Lets the skill ``stamped`` through at once, without a word, and serves it itself: the
    gate's name must stay with the task that a module then serves."""

    def __init__(self) -> None:
        self.endings: list[EndingTask] = []

    @hookimpl
    def anet_task_gate(self, node, task):
        if task.skill == "stamped" and not task.continued:
            return TaskGate(module="stamp", verdict=GateVerdict(GateAction.PASS))
        return None

    @hookimpl
    def anet_take_task(self, node, task):
        async def serve(task, responder) -> None:
            await responder.complete("stamped")

        return TaskClaim(module="stamp", serve=serve) if task.skill == "stamped" else None

    @hookimpl
    def anet_task_ending(self, node, task):
        if task.gate != "stamp":
            return None
        self.endings.append(task)
        return TaskGate(module="stamp", verdict=GateVerdict(GateAction.PASS))


async def test_a_task_a_gate_let_through_at_once_keeps_the_gate_when_a_module_serves_it(
        tmp_path: Path) -> None:
    hub, stamp = FakeHub(), Stamp()
    async with open_node(tmp_path / "a", hub) as a, \
            open_node(tmp_path / "b", hub, plugins=plugins_with(stamp)) as b:
        b.tasks.trust(a.aid)
        task = await a.tasks.send(b.aid, user_message("stamp this"), skill="stamped")
        await eventually(lambda: state(a, task["id"]) == "TASK_STATE_COMPLETED")
        served = b.store.get_task(task["id"])
        assert served is not None and served.served_by == "stamp"
        assert served.task["metadata"]["anet.gate"] == "stamp"
        assert [ending.task_id for ending in stamp.endings] == [task["id"]]


def test_the_cards_charge_follows_the_priced_skills() -> None:
    skills = [{"id": "summarize"}, {"id": "echo"}]
    assert charge_of(skills, frozenset()) is Charge.FREE
    assert charge_of(skills, frozenset({"summarize", "unlisted"})) is Charge.PARTIAL
    assert charge_of(skills, frozenset({"summarize", "echo"})) is Charge.PAID
    assert charge_of([], frozenset({"summarize"})) is Charge.FREE

    async def none() -> list:
        return []

    sources = [SkillSource("x", none, prices={"a": {"amount": "1"}}), SkillSource("y", none),
               SkillSource("z", none, prices={"b": {"amount": "2"}, "a": {"amount": "3"}})]
    assert priced_skills(lambda: sources) == {"a", "b"}
    assert card_prices(lambda: sources) == {"a": {"amount": "1"}, "b": {"amount": "2"}}
