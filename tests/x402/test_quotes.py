"""The payee's quote, its card's charge and the payments it refuses before asking a rail: a
real hub and two real nodes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anet_core import hookimpl
from anet_core.evidence import verify
from anet_core.protocol.amounts import rail_network
from anet_core.records import TaskClaim
from tests.support.hubs import RunningHub
from tests.support.waiting import eventually
from tests.x402.payee import SKILL, Pair, alice_and_bob, payment, quote_of, submitted

pytestmark = pytest.mark.timeout(90)

FAILED = "TASK_STATE_FAILED"


async def test_a_priced_task_is_quoted_and_the_card_says_partial(tmp_path: Path,
                                                                  hub: RunningHub) -> None:
    async with alice_and_bob(tmp_path, hub.url) as pair:
        async def card() -> dict | None:
            pair.alice.hub.forget_peer(pair.bob.aid)
            return (await pair.alice.hub.peer(pair.bob.aid)).card

        assert (await eventually(card, "bob's card"))["charge"] == "partial"  # echo is free
        task = await pair.ask()
        assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        metadata = task["status"]["message"]["metadata"]
        assert metadata["x402.payment.status"] == "payment-required"
        required = metadata["x402.payment.required"]
        hub_aid = hub.state.identity.aid
        assert required["x402Version"] == 2
        assert required["resource"]["url"] == f"anet:{pair.bob.aid}#{SKILL}"
        assert required["accepts"] == [{
            "scheme": "exact", "network": rail_network(hub_aid), "asset": "USD",
            "amount": "5", "payTo": pair.bob.aid, "maxTimeoutSeconds": 600,
            "extra": {"task": task["id"], "hubUrl": hub.http}}]
        # Nothing reached the inbox, and an answer that is no payment gets the quote again.
        assert pair.bob.tasks.inbox() == []
        seq = task["metadata"]["anet.state_seq"]
        await pair.answer(task, {}, text="what does it cost?")
        await eventually(lambda: pair.task(task["id"])["metadata"]["anet.state_seq"] > seq,
                         "quoted again")
        assert quote_of(pair, task["id"])["accepts"] == required["accepts"]
        assert pair.bob.tasks.inbox() == []
        # A free skill is not held.
        free = await pair.ask(skill="echo")
        assert free["metadata"]["anet.reason"] == "queued_for_operator"
    chain = verify(tmp_path / "bob" / "evidence" / "chain.jsonl",
                   pair.bob.identity.verified_history)
    assert chain.ok


@pytest.mark.parametrize(("change", "error"), [
    ({"payee": "other"}, "recipient_mismatch"),
    ({"task": "another-task-id"}, "task_mismatch"),
    ({"amount": 4}, "amount_mismatch"),
    ("option", "option_not_offered"),
    ("garbage", "invalid_payload"),
])
async def test_a_payment_that_does_not_match_the_quote_fails(
        tmp_path: Path, hub: RunningHub, change: object, error: str) -> None:
    async with alice_and_bob(tmp_path, hub.url) as pair:
        task = await pair.ask()
        option = quote_of(pair, task["id"])["accepts"][0]
        if change == "option":
            payload = payment(pair, option | {"amount": "1"}, amount=1)
        elif change == "garbage":
            payload = {"x402Version": 2, "accepted": "nope"}
        else:
            assert isinstance(change, dict)
            if change.get("payee") == "other":
                change = {"payee": pair.alice.aid}
            payload = payment(pair, option, **change)
        await pair.answer(task, submitted(payload))
        await eventually(lambda: pair.state(task["id"]) == FAILED, "the payment refused")
        metadata = pair.status_metadata(task["id"])
        assert metadata["x402.payment.status"] == "payment-failed"
        assert metadata["x402.payment.error"] == error
        assert pair.bob.tasks.inbox() == []
        text = pair.task(task["id"])["status"]["message"]["parts"][0]["text"]
        assert text  # names the value
        await check_refusal_recorded(pair, tmp_path, error)


async def check_refusal_recorded(pair: Pair, root: Path, error: str) -> None:
    path = root / "bob" / "evidence" / "chain.jsonl"
    await eventually(lambda: path.exists() and f'"error":"{error}"' in path.read_text(),
                     "the refusal's record")  # the chain appends a moment after the step
    assert verify(path, pair.bob.identity.verified_history).ok


async def test_a_declined_payment_ends_the_task(tmp_path: Path, hub: RunningHub) -> None:
    async with alice_and_bob(tmp_path, hub.url) as pair:
        task = await pair.ask()
        await pair.answer(task, {"x402.payment.status": "payment-rejected"}, text="no thanks")
        await eventually(lambda: pair.state(task["id"]) == FAILED, "the task ended")
        assert pair.status_metadata(task["id"])["x402.payment.error"] == "payment_rejected"
        assert pair.bob.tasks.inbox() == []


async def test_a_price_under_star_prices_every_other_task_and_the_card_says_paid(
        tmp_path: Path, hub: RunningHub) -> None:
    prices = {"*": {"amount": "0.20"}, SKILL: {"amount": "0.05"}}
    async with alice_and_bob(tmp_path, hub.url, prices=prices) as pair:
        async def card() -> dict | None:
            pair.alice.hub.forget_peer(pair.bob.aid)
            return (await pair.alice.hub.peer(pair.bob.aid)).card

        assert (await eventually(card, "bob's card"))["charge"] == "paid"
        named = quote_of(pair, (await pair.ask())["id"])
        assert [option["amount"] for option in named["accepts"]] == ["5"]  # its own price
        for skill in ("echo", None):  # another skill, and a task that names none
            task = await pair.ask(skill=skill)
            assert task["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
            required = quote_of(pair, task["id"])
            assert [option["amount"] for option in required["accepts"]] == ["20"]
            assert required["resource"]["url"] == f"anet:{pair.bob.aid}#{skill or '*'}"
        assert pair.bob.tasks.inbox() == []


class ServesStrangers:
    """A module that would serve anyone's task for the priced skill (and is never reached
    here: the task waits for its payment)."""

    @hookimpl
    def anet_take_task(self, node, task):  # type: ignore[no-untyped-def]
        if task.skill != SKILL:
            return None

        async def serve(task, responder):  # type: ignore[no-untyped-def]
            await responder.complete(artifacts=["served"])

        return TaskClaim(module="open-door", serve=serve)


@pytest.mark.parametrize("served", [False, True], ids=["no-module-serves", "a-module-serves"])
async def test_a_stranger_the_policy_refuses_is_not_quoted(tmp_path: Path, hub: RunningHub,
                                                           served: bool) -> None:
    """Under ``trusted``, a stranger's task for a priced skill is quoted only when a module
    would serve it; otherwise it is rejected ``not_trusted`` and sees no price, no rail."""
    async with alice_and_bob(tmp_path, hub.url,
                             worker=ServesStrangers() if served else None) as pair:
        pair.bob.tasks.distrust(pair.alice.aid)
        task = await pair.ask()
        await eventually(lambda: pair.state(task["id"]) != "TASK_STATE_SUBMITTED", "answered")
        shown = pair.task(task["id"])
        received = pair.bob.tasks.received(task["id"])
    if served:
        assert shown["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
        assert "x402.payment.required" in shown["status"]["message"]["metadata"]
        return
    assert shown["status"]["state"] == "TASK_STATE_REJECTED"
    assert shown["metadata"]["anet.reason"] == "not_trusted"
    assert "x402" not in json.dumps(shown) and "x402" not in json.dumps(received)
