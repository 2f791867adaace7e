"""The task layer between two nodes over the in-process relay: every rule of both sides."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from anet_core import hookimpl
from anet_core.errors import AnetError
from anet_core.evidence import verify
from anet_core.link import AckTiming
from anet_core.protocol import envelope as envelope_module
from anet_core.protocol.envelope import open_envelope
from anet_core.protocol.tasks import ArtifactChunk
from anet_core.records import InboundTask, TaskClaim
from anet_core.store import StoredTask, TaskRole
from anet_core.tasks import Responder, TaskError
from anet_core.util.canonical import unb64u
from anet_core.wire import TaskState
from tests.support.fakes import FakeHub
from tests.support.messages import user_message
from tests.support.nodes import open_node, plugins_with
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(60)

COMPLETED = "TASK_STATE_COMPLETED"


def state(node, task_id: str) -> str:
    return node.tasks.get(None, task_id)["status"]["state"]


async def test_send_inbox_reply_receipt(tmp_path: Path, hub: FakeHub) -> None:
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        b.tasks.trust(a.aid)
        task = await a.tasks.send(b.aid, user_message("hello"))
        assert task["status"]["state"] == "TASK_STATE_SUBMITTED"
        assert task["metadata"]["anet.state_seq"] == 0
        inbox = await eventually(lambda: b.tasks.inbox())
        assert inbox[0]["id"] == task["id"] and inbox[0]["peer"] == a.aid
        assert inbox[0]["history"][0]["parts"] == [{"text": "hello"}]
        await eventually(lambda: a.tasks.get(b.aid, task["id"])["metadata"].get("anet.reason")
                         == "queued_for_operator")
        await b.tasks.reply(task["id"], "hi there")
        await eventually(lambda: state(a, task["id"]) == COMPLETED)
        done = a.tasks.get(b.aid, task["id"])
        assert done["artifacts"][0]["parts"] == [{"text": "hi there"}]
        assert done["metadata"]["anet.receipt_verified"] is True
        assert done["metadata"]["anet.effect_status"] == "done"
        assert done["metadata"]["anet.state_seq"] == 2
        kept = a.store.get_task(task["id"], role=TaskRole.REQUESTER)  # for a review later
        assert kept is not None and kept.receipt is not None and kept.receipt["provider"] == b.aid
        assert b.tasks.inbox() == []
    for node_dir, node in (("a", a), ("b", b)):
        report = verify(tmp_path / node_dir / "evidence" / "chain.jsonl",
                        node.identity.verified_history)
        assert report.ok and report.records >= 1


async def test_a_peers_envelopes_share_one_ephemeral_key_and_open_with_one_exchange(
        tmp_path: Path, hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    exchanged: list[bytes] = []  # the other party's public key of each X25519 exchange
    real = envelope_module.EncryptionKey.exchange

    def recorded(self: envelope_module.EncryptionKey, public: bytes) -> bytes:
        exchanged.append(bytes(public))
        return real(self, public)

    monkeypatch.setattr(envelope_module.EncryptionKey, "exchange", recorded)
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        b.tasks.trust(a.aid)
        sent_to_b = lambda: [e for e in hub.seen if e["to"] == b.aid]  # noqa: E731
        for text in ("one", "two"):
            await a.tasks.send(b.aid, user_message(text, f"m-{text}"))
        inbox = await eventually(lambda: b.tasks.inbox() if len(b.tasks.inbox()) == 2 else None)
        assert len(inbox) == 2
        epks = {unb64u(envelope["epk"]) for envelope in sent_to_b()}
        assert len(epks) == 1  # one ephemeral key for both
        (epk,) = epks
        assert exchanged.count(epk) == 1  # b derived its key once: the second opened with it


async def test_stranger_rejected_and_new_node_closed_to_strangers(tmp_path: Path,
                                                                  hub: FakeHub) -> None:
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        task = await a.tasks.send(b.aid, user_message("let me in"))
        await eventually(lambda: state(a, task["id"]) == "TASK_STATE_REJECTED")
        rejected = a.tasks.get(b.aid, task["id"])
        assert rejected["metadata"]["anet.reason"] == "not_trusted"
        assert rejected["metadata"]["anet.effect_status"] == "none"
        assert rejected["metadata"]["anet.receipt_verified"] is True
        assert b.tasks.inbox() == []
        b.tasks.set_policy("closed")
        b.tasks.trust(a.aid)
        closed = await a.tasks.send(b.aid, user_message("and now?", "m-2"))
        await eventually(lambda: state(a, closed["id"]) == "TASK_STATE_REJECTED")
        assert a.tasks.get(None, closed["id"])["metadata"]["anet.reason"] == "rejected_by_policy"


async def test_open_policy_accepts_strangers(tmp_path: Path, hub: FakeHub) -> None:
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        b.tasks.set_policy("open")
        await a.tasks.send(b.aid, user_message("anyone home?"))
        await eventually(lambda: b.tasks.inbox())


async def test_unregistered_node_refuses_and_creates_no_task(tmp_path: Path, hub: FakeHub) -> None:
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        a.hub.registered = False
        with pytest.raises(TaskError) as refused:
            await a.tasks.send(b.aid, user_message("hello"))
        assert refused.value.reason == "not-registered"
        assert "has not joined a hub" in refused.value.message
        assert a.tasks.list()["tasks"] == [] and a.store.outbox_next_attempt() is None


async def test_bad_input(tmp_path: Path, hub: FakeHub) -> None:
    async with open_node(tmp_path / "a", hub) as a:
        for aid, reason in (("nope", "invalid-aid"), ("a" * 32, "unknown-agent"),
                               (a.aid, "unknown-agent")):
            with pytest.raises(AnetError) as error:  # AidError or TaskError
                await a.tasks.send(aid, user_message("x"))
            assert error.value.reason == reason and aid[:10] in error.value.message
        with pytest.raises(TaskError, match="role"):
            await a.tasks.send("b" * 32, {"messageId": "x", "role": "ROLE_AGENT",
                                          "parts": [{"text": "x"}]})
        with pytest.raises(TaskError, match="parts"):
            await a.tasks.send("b" * 32, {"messageId": "x", "role": "ROLE_USER", "parts": []})
        with pytest.raises(TaskError) as missing:
            a.tasks.get(None, "no-such-task")
        assert missing.value.reason == "task-not-found"
        assert "no-such-task" in missing.value.message
        assert a.tasks.list()["tasks"] == []


async def test_idempotent_resend(tmp_path: Path, hub: FakeHub) -> None:
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        b.tasks.trust(a.aid)
        first = await a.tasks.send(b.aid, user_message("once", contextId="ctx-1"))
        again = await a.tasks.send(b.aid, user_message("once", contextId="ctx-1"))
        assert again["id"] == first["id"]
        # Without a contextId a message is never matched: a new task in a new context.
        loose1 = await a.tasks.send(b.aid, user_message("loose"))
        loose2 = await a.tasks.send(b.aid, user_message("loose"))
        assert loose1["id"] != loose2["id"] and loose1["contextId"] != loose2["contextId"]
        # Concurrent identical sends: one task, one envelope.
        racing = await asyncio.gather(*[
            a.tasks.send(b.aid, user_message("race", "m-r", contextId="c")) for _ in range(5)])
        assert len({task["id"] for task in racing}) == 1
        await eventually(lambda: len(b.tasks.inbox()) == 4)
        assert len([e for e in hub.seen if e["to"] == b.aid]) == 4
        # A task id of another agent is "not found".
        with pytest.raises(TaskError, match="no task"):
            a.tasks.get("c" * 32, first["id"])


async def test_multi_turn(tmp_path: Path, hub: FakeHub) -> None:
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        b.tasks.trust(a.aid)
        task = await a.tasks.send(b.aid, user_message("book a table"))
        await eventually(lambda: b.tasks.inbox())
        with pytest.raises(TaskError) as busy:
            await a.tasks.send(b.aid, user_message("more", "m-2", taskId=task["id"]))
        assert busy.value.reason == "task-not-waiting"
        await b.tasks.reply(task["id"], "for how many?", input_required=True)
        await eventually(lambda: state(a, task["id"]) == "TASK_STATE_INPUT_REQUIRED")
        question = a.tasks.get(b.aid, task["id"])["status"]["message"]
        assert question["parts"] == [{"text": "for how many?"}]
        follow = await a.tasks.send(b.aid, user_message("four", "m-2", taskId=task["id"]))
        assert follow["id"] == task["id"]
        await eventually(lambda: len(b.tasks.inbox()[0]["history"]) == 3)
        await b.tasks.reply(task["id"], "booked")
        await eventually(lambda: state(a, task["id"]) == COMPLETED)
        history = a.tasks.get(b.aid, task["id"])["history"]
        assert [m["parts"][0]["text"] for m in history] == ["book a table", "for how many?", "four"]
        with pytest.raises(TaskError) as closed:
            await a.tasks.send(b.aid, user_message("again", "m-3", taskId=task["id"]))
        assert closed.value.reason == "task-terminal"


async def test_cancel(tmp_path: Path, hub: FakeHub) -> None:
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        b.tasks.trust(a.aid)
        task = await a.tasks.send(b.aid, user_message("long job"))
        await eventually(lambda: b.tasks.inbox())
        canceled = await a.tasks.cancel(b.aid, task["id"])
        assert canceled["status"]["state"] == "TASK_STATE_CANCELED"
        assert canceled["metadata"]["anet.reason"] == "canceled_by_requester"
        await eventually(lambda: b.tasks.inbox() == [])
        await eventually(lambda: a.tasks.get(None, task["id"])["metadata"].get(
            "anet.receipt_verified") is True)
        with pytest.raises(TaskError) as again:
            await a.tasks.cancel(b.aid, task["id"])
        assert again.value.reason == "task-not-cancelable"


async def test_cancel_before_the_hub_took_it_has_no_effect(tmp_path: Path, hub: FakeHub,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        await asyncio.sleep(0.05)  # the outbox loop has looked once and sleeps (up to 1 s)
        monkeypatch.setattr(a.tasks.outbox, "wake", lambda: None)
        task = await a.tasks.send(b.aid, user_message("queued"))
        canceled = await a.tasks.cancel(b.aid, task["id"])
        assert canceled["metadata"]["anet.effect_status"] == "none"
        assert a.store.outbox_next_attempt() is None  # nothing left to send
        await asyncio.sleep(1.2)
        assert hub.seen == []


async def test_a_task_never_says_none_while_its_message_can_reach_the_agent(
        tmp_path: Path, hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        hub.receivers.pop(b.aid)  # b is offline: the hub keeps the envelope, b says nothing
        told: list[str] = []  # what a reader of the task sees as the hub gets the message
        give = a.hub.send

        async def send(envelope: dict[str, Any] | str) -> None:
            (task_id,) = [entry.task_id for entry in a.store.outbox_due(float("inf"))]
            told.append(a.tasks.get(None, task_id)["metadata"]["anet.effect_status"])
            await give(envelope)

        monkeypatch.setattr(a.hub, "send", send)
        task = await a.tasks.send(b.aid, user_message("on its way"))
        assert task["metadata"]["anet.effect_status"] == "possible"
        await eventually(lambda: a.store.outbox_next_attempt() is None)  # the hub took it
        assert told == ["possible"]
        # The hub's acceptance changed nothing the client was told: the task is as it was sent.
        assert a.tasks.get(None, task["id"]) == task


async def _send_while_hub_refuses_delivery(a, b):
    # The link says registered while the hub drops: the message waits in the outbox.
    hub = a.hub.hub
    hub.up = True
    hub.refuse = "rate-limited"
    task = await a.tasks.send(b.aid, user_message("queued"))
    await eventually(lambda: a.store.outbox_due(float("inf")) and
                     a.store.outbox_due(float("inf"))[0].attempts >= 1)
    return task


async def test_outbox_retries_without_duplicates(tmp_path: Path, hub: FakeHub) -> None:
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        b.tasks.trust(a.aid)
        task = await _send_while_hub_refuses_delivery(a, b)
        hub.refuse = None
        a.tasks.outbox.wake()
        await eventually(lambda: b.tasks.inbox(), timeout=10)
        assert len([e for e in hub.seen if e["to"] == b.aid]) == 1
        assert state(a, task["id"]) == "TASK_STATE_SUBMITTED"


async def test_hub_refusal_fails_task(tmp_path: Path, hub: FakeHub) -> None:
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        hub.refuse = "too-large"
        task = await a.tasks.send(b.aid, user_message("big"))
        await eventually(lambda: state(a, task["id"]) == "TASK_STATE_FAILED")
        failed = a.tasks.get(None, task["id"])
        assert failed["metadata"]["anet.reason"] == "hub_refused"
        assert failed["metadata"]["anet.effect_status"] == "none"


async def test_no_response_after(tmp_path: Path, hub: FakeHub) -> None:
    async with open_node(tmp_path / "a", hub, no_response_after="200ms") as a, \
            open_node(tmp_path / "b", hub) as b:
        hub.receivers.pop(b.aid)  # b is offline: the hub keeps the envelope
        task = await a.tasks.send(b.aid, user_message("anyone?"))
        await eventually(lambda: state(a, task["id"]) == "TASK_STATE_FAILED")
        failed = a.tasks.get(None, task["id"])
        assert failed["metadata"]["anet.reason"] == "no_response"
        assert failed["metadata"]["anet.effect_status"] == "possible"


async def test_restart_loses_nothing(tmp_path: Path, hub: FakeHub) -> None:
    async with open_node(tmp_path / "a", hub), open_node(tmp_path / "b", hub) as b:
        b.tasks.trust(next(aid for aid in hub.identities if aid != b.aid))
        b_aid = b.aid
    hub.refuse = "unreachable"  # A stops with its message still in the outbox
    async with open_node(tmp_path / "a", hub) as a:
        task = await a.tasks.send(b_aid, user_message("survive"))
    hub.refuse = None
    async with open_node(tmp_path / "a", hub):  # sent after A's restart; B is offline
        await eventually(lambda: hub.queues[b_aid])
    async with open_node(tmp_path / "b", hub) as b:
        await eventually(lambda: b.tasks.inbox())
    async with open_node(tmp_path / "b", hub) as b:  # still in the inbox after B's restart
        assert b.tasks.inbox()[0]["id"] == task["id"]
        await b.tasks.reply(task["id"], "still here")  # B stops before it is sent
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub):
        await eventually(lambda: state(a, task["id"]) == COMPLETED)
        assert a.tasks.get(b_aid, task["id"])["metadata"]["anet.receipt_verified"] is True
        assert len([e for e in hub.seen if e["to"] == b_aid]) == 1


async def test_tampered_replayed_misaddressed_envelopes(tmp_path: Path, hub: FakeHub,
                                                        caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING, logger="anet_core.tasks.inbound")
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b, \
            open_node(tmp_path / "c", hub) as c:
        b.tasks.set_policy("open")
        await a.tasks.send(b.aid, user_message("original"))
        await eventually(lambda: len(b.tasks.inbox()) == 1)
        original = next(e for e in hub.seen if e["to"] == b.aid)
        await b.tasks.inbound(dict(original))  # replayed
        tampered = dict(original, ct=original["ct"][:-4] + ("AAAA" if original["ct"][-4:] != "AAAA"
                                                              else "BBBB"))
        tampered["id"] = original["id"][:-2] + ("AA" if original["id"][-2:] != "AA" else "BA")
        await b.tasks.inbound(tampered)
        await c.tasks.inbound(dict(original))  # misaddressed: for b, given to c
        await b.tasks.inbound({"v": 1, "nonsense": True})
        assert len(b.tasks.inbox()) == 1 and c.tasks.inbox() == []
    reasons = " ".join(record.getMessage() for record in caplog.records)
    for word in ("replayed", "tampered", "misaddressed", "malformed"):
        assert word in reasons


async def _held_updates(a, b, task_id: str, hub: FakeHub) -> list[dict]:
    """B reports working, an artifact, then completes, while A's envelopes are held back; each
    report leaves before the next (reports queued together leave as the last one alone, see
    test_progress_queued_with_the_end_leaves_as_one_update)."""
    hub.receivers.pop(a.aid)
    provider = b.tasks.provider
    await provider.report(task_id, TaskState.TASK_STATE_WORKING, message=None, chunks=[],
                          final_artifacts=None, reason=None)
    await eventually(lambda: len(hub.queues[a.aid]) == 1)
    chunk = ArtifactChunk(artifact={"artifactId": "art", "parts": [{"text": "part 1"}]})
    await provider.report(task_id, TaskState.TASK_STATE_WORKING, message=None, chunks=[chunk],
                          final_artifacts=None, reason=None)
    await eventually(lambda: len(hub.queues[a.aid]) == 2)
    await provider.reply(task_id, "done")
    await eventually(lambda: len(hub.queues[a.aid]) == 3)
    return hub.queues.pop(a.aid)


async def test_out_of_order_and_duplicate_updates(tmp_path: Path, hub: FakeHub) -> None:
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        b.tasks.trust(a.aid)
        task = await a.tasks.send(b.aid, user_message("stream"))
        await eventually(lambda: a.tasks.get(None, task["id"])["metadata"]["anet.state_seq"] == 1)
        seq2, seq3, seq4 = await _held_updates(a, b, task["id"], hub)
        subscription = a.tasks.subscribe(b.aid, task["id"])
        await a.tasks.inbound(seq3)  # ahead of a gap: held
        assert a.tasks.get(None, task["id"])["metadata"]["anet.state_seq"] == 1
        await a.tasks.inbound(seq2)  # fills the gap: 2 and 3 applied
        current = a.tasks.get(None, task["id"])
        assert current["metadata"]["anet.state_seq"] == 3
        assert current["artifacts"][0]["parts"] == [{"text": "part 1"}]
        await a.tasks.inbound(seq4)
        await a.tasks.inbound(seq4)  # replayed: refused, nothing changes
        assert state(a, task["id"]) == COMPLETED
        events = [event async for event in subscription]
        assert [next(iter(event)) for event in events] == [
            "task", "statusUpdate", "artifactUpdate", "artifactUpdate", "statusUpdate"]


async def test_progress_queued_with_the_end_leaves_as_one_update(tmp_path: Path,
                                                                 hub: FakeHub) -> None:
    """A backend that answers at once: WORKING, an artifact and the completion are queued
    before the outbox runs; only the terminal update leaves, and the requester ends up with
    the same task (artifact, receipt) as from three updates."""
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        b.tasks.trust(a.aid)
        task = await a.tasks.send(b.aid, user_message("stream"))
        await eventually(lambda: a.tasks.get(None, task["id"])["metadata"]["anet.state_seq"] == 1)
        hub.receivers.pop(a.aid)
        provider = b.tasks.provider
        chunk = ArtifactChunk(artifact={"artifactId": "art", "parts": [{"text": "part 1"}]})
        await provider.report(task["id"], TaskState.TASK_STATE_WORKING, message=None, chunks=[],
                              final_artifacts=None, reason=None)
        await provider.report(task["id"], TaskState.TASK_STATE_WORKING, message=None,
                              chunks=[chunk], final_artifacts=None, reason=None)
        await provider.reply(task["id"], "done")
        await eventually(lambda: not b.store.outbox_depth())
        (only,) = hub.queues.pop(a.aid)
        await a.tasks.inbound(only)
        done = a.tasks.get(None, task["id"])
        assert done["status"]["state"] == COMPLETED and done["metadata"]["anet.state_seq"] == 4
        assert done["metadata"]["anet.receipt_verified"] is True
        assert done["artifacts"][0]["parts"] == [{"text": "part 1"}]


async def test_terminal_update_after_a_gap_is_applied(tmp_path: Path, hub: FakeHub) -> None:
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        b.tasks.trust(a.aid)
        task = await a.tasks.send(b.aid, user_message("stream"))
        await eventually(lambda: a.tasks.get(None, task["id"])["metadata"]["anet.state_seq"] == 1)
        seq2, seq3, seq4 = await _held_updates(a, b, task["id"], hub)
        await a.tasks.inbound(seq4)
        await a.tasks.inbound(seq2)
        await a.tasks.inbound(seq3)
        done = a.tasks.get(None, task["id"])
        assert done["status"]["state"] == COMPLETED and done["metadata"]["anet.state_seq"] == 4
        assert done["metadata"]["anet.receipt_verified"] is True
        assert [artifact["artifactId"] for artifact in done["artifacts"]][0] == "art"
        assert a.store.held_update(task["id"], 3) is None


async def test_subscribe_fan_out(tmp_path: Path, hub: FakeHub) -> None:
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        b.tasks.trust(a.aid)
        task = await a.tasks.send(b.aid, user_message("watch me"))

        async def collect() -> list[dict]:
            return [event async for event in a.tasks.subscribe(b.aid, task["id"])]

        first, second = asyncio.create_task(collect()), asyncio.create_task(collect())
        quitter = a.tasks.subscribe(b.aid, task["id"])
        quitter.close()
        await eventually(lambda: b.tasks.inbox())
        await b.tasks.reply(task["id"], "done")
        one, two = await asyncio.wait_for(asyncio.gather(first, second), 5)
        assert one == two
        assert "task" in one[0]
        kinds = [next(iter(event)) for event in one]
        assert kinds[-2:] == ["artifactUpdate", "statusUpdate"]
        assert one[-1]["statusUpdate"]["status"]["state"] == COMPLETED
        assert state(a, task["id"]) == COMPLETED


async def test_a_subscription_is_its_own_iterator_and_stays_ended(tmp_path: Path,
                                                                  hub: FakeHub) -> None:
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        b.tasks.trust(a.aid)
        task = await a.tasks.send(b.aid, user_message("watch me"))
        subscription = a.tasks.subscribe(b.aid, task["id"])
        # Not an async generator: one left suspended after a blocking send would be closed
        # by the event loop later, in a task of its own.
        assert aiter(subscription) is subscription
        await eventually(lambda: b.tasks.inbox())
        await b.tasks.reply(task["id"], "done")
        async with asyncio.timeout(5):
            events = [event async for event in subscription]
        assert events[-1]["statusUpdate"]["status"]["state"] == COMPLETED
        with pytest.raises(StopAsyncIteration):
            await anext(subscription)  # at once, not waiting for an event that never comes


async def test_a_subscription_holds_the_task_as_its_events_left_it(tmp_path: Path,
                                                                   hub: FakeHub) -> None:
    """What a blocking send answers with once its stream ended, without reading the task
    again (``EventStream.until_end`` in the a2a module)."""
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        b.tasks.trust(a.aid)
        task = await a.tasks.send(b.aid, user_message("watch me"))
        subscription = a.tasks.subscribe(b.aid, task["id"])
        assert subscription.task == subscription.snapshot == a.tasks.get(None, task["id"])
        await eventually(lambda: b.tasks.inbox())
        await b.tasks.reply(task["id"], "done")
        async with asyncio.timeout(5):
            async for _ in subscription:
                pass
        assert subscription.task["status"]["state"] == COMPLETED
        assert subscription.task == a.tasks.get(None, task["id"])


async def test_list_filters_and_pages(tmp_path: Path, hub: FakeHub) -> None:
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        ids = [(await a.tasks.send(b.aid, user_message(f"t{i}", f"m{i}", contextId="ctx")))["id"]
               for i in range(5)]
        page = a.tasks.list(b.aid, page_size=2)
        assert page["totalSize"] == 5 and len(page["tasks"]) == 2 and page["nextPageToken"]
        seen = [task["id"] for task in page["tasks"]]
        while page["nextPageToken"]:
            page = a.tasks.list(b.aid, page_size=2, page_token=page["nextPageToken"])
            seen += [task["id"] for task in page["tasks"]]
        assert sorted(seen) == sorted(ids)
        assert a.tasks.list(context_id="other")["totalSize"] == 0
        assert "artifacts" not in a.tasks.list()["tasks"][0]
        with pytest.raises(TaskError):
            a.tasks.list(page_size=0)
        with pytest.raises(TaskError):
            a.tasks.list(page_token="garbage!")


class _Interviewer:
    """A module that asks one question, streams an artifact, then completes; or waits forever
    (``skill="slow"``) until the requester cancels."""

    def __init__(self) -> None:
        self.cancelled = asyncio.Event()

    @hookimpl
    def anet_take_task(self, node, task: InboundTask) -> TaskClaim:
        async def serve(task: InboundTask, responder: Responder) -> None:
            if task.skill == "slow":
                await responder.working("thinking")
                await responder.cancelled.wait()
                self.cancelled.set()
                await responder.complete("too late")  # ignored: the task has ended
                return
            await responder.input_required("which language?")
            answer = await responder.next_message()
            await responder.artifact({"artifactId": "a1", "parts": [{"text": "bon"}]},
                                     last_chunk=False)
            await responder.artifact({"artifactId": "a1", "parts": [{"text": "jour"}]},
                                     append=True)
            await responder.complete(f"done in {answer['parts'][0]['text']}")

        return TaskClaim(module="interviewer", serve=serve)


async def test_a_module_that_answers_with_an_invalid_artifact_fails_the_task(
        tmp_path: Path, hub: FakeHub) -> None:
    """The update that would carry it is refused before anything ends: the module's error fails
    the task (provider_failed) on both sides, instead of leaving it open for ever."""

    class Garbles:
        @hookimpl
        def anet_take_task(self, node, task: InboundTask) -> TaskClaim:
            async def serve(task: InboundTask, responder: Responder) -> None:
                await responder.complete("done", artifacts=[{"artifactId": "a1",
                                                             "parts": "not a list"}])

            return TaskClaim(module="garbles", serve=serve)

    async with open_node(tmp_path / "a", hub) as a, \
            open_node(tmp_path / "b", hub, plugins=plugins_with(Garbles())) as b:
        b.tasks.trust(a.aid)
        task = await a.tasks.send(b.aid, user_message("hello"))
        await eventually(lambda: state(a, task["id"]) == "TASK_STATE_FAILED")
        failed = a.tasks.get(b.aid, task["id"])
        assert failed["metadata"]["anet.reason"] == "provider_failed"
        assert failed.get("artifacts", []) == []  # the invalid one never left
        assert b.tasks.received(task["id"])["status"]["state"] == "TASK_STATE_FAILED"


async def test_module_serves_through_the_responder(tmp_path: Path, hub: FakeHub) -> None:
    module = _Interviewer()
    plugins = plugins_with(module)
    async with open_node(tmp_path / "a", hub) as a, \
            open_node(tmp_path / "b", hub, plugins=plugins) as b:
        b.tasks.trust(a.aid)
        task = await a.tasks.send(b.aid, user_message("greet"))
        await eventually(lambda: state(a, task["id"]) == "TASK_STATE_INPUT_REQUIRED")
        await a.tasks.send(b.aid, user_message("french", "m-2", taskId=task["id"]))
        await eventually(lambda: state(a, task["id"]) == COMPLETED)
        done = a.tasks.get(b.aid, task["id"])
        assert done["artifacts"] == [{"artifactId": "a1", "parts": [{"text": "bon"},
                                                                     {"text": "jour"}]}]
        assert done["status"]["message"]["parts"] == [{"text": "done in french"}]
        assert done["metadata"]["anet.receipt_verified"] is True
        assert b.tasks.inbox() == []

        slow = await a.tasks.send(b.aid, user_message("ponder", "m-3"), skill="slow")
        await eventually(lambda: state(a, slow["id"]) == "TASK_STATE_WORKING")
        await a.tasks.cancel(b.aid, slow["id"])
        await asyncio.wait_for(module.cancelled.wait(), 5)
        await eventually(lambda: b.tasks.received(slow["id"])["status"]["state"]
                         == "TASK_STATE_CANCELED")


async def test_only_an_update_that_does_not_end_its_turn_is_acknowledged_at_once(
        tmp_path: Path, hub: FakeHub) -> None:
    """The provider sends a task's next update only once the one before it was taken; nothing
    waits for the acknowledgement of a message, a cancel or a turn's end (here: a question),
    which waits for the receiver's next flush made anyway (``AckTiming``)."""
    module = _Interviewer()
    async with open_node(tmp_path / "a", hub) as a, \
            open_node(tmp_path / "b", hub, plugins=plugins_with(module)) as b:
        b.tasks.trust(a.aid)
        task = await a.tasks.send(b.aid, user_message("greet"))
        await eventually(lambda: state(a, task["id"]) == "TASK_STATE_INPUT_REQUIRED")
        slow = await a.tasks.send(b.aid, user_message("ponder", "m-2"), skill="slow")
        await eventually(lambda: state(a, slow["id"]) == "TASK_STATE_WORKING")
        await a.tasks.cancel(b.aid, slow["id"])
        await eventually(lambda: len([e for e in hub.seen if e["to"] == a.aid]) == 3)
        await eventually(lambda: all(envelope["id"] in hub.timings for envelope in hub.seen))
    told: list[tuple[str, AckTiming | None]] = []
    for envelope in hub.seen:
        if envelope["to"] == b.aid:
            told.append(("to the provider", hub.timings[envelope["id"]]))
        else:
            body = open_envelope(envelope, a.identity, b.identity.verified_history).body
            told.append((body["status"]["state"], hub.timings[envelope["id"]]))
    at_once, later = AckTiming.AT_ONCE, AckTiming.WITH_NEXT_FLUSH
    assert told == [("to the provider", later), ("TASK_STATE_INPUT_REQUIRED", later),
                    ("to the provider", later), ("TASK_STATE_WORKING", at_once),
                    ("to the provider", later), ("TASK_STATE_CANCELED", later)]


async def test_module_can_leave_a_task_to_the_operator(tmp_path: Path, hub: FakeHub) -> None:
    class Declines:
        @hookimpl
        def anet_take_task(self, node, task: InboundTask) -> TaskClaim:
            async def serve(task: InboundTask, responder: Responder) -> None:
                await responder.to_inbox("the backend is not configured")
                await responder.complete("ignored")

            return TaskClaim(module="declines", serve=serve)

    plugins = plugins_with(Declines())
    async with open_node(tmp_path / "a", hub) as a, \
            open_node(tmp_path / "b", hub, plugins=plugins) as b:
        b.tasks.trust(a.aid)
        task = await a.tasks.send(b.aid, user_message("hello"))
        await eventually(lambda: b.tasks.inbox())
        await eventually(lambda: a.tasks.get(None, task["id"])["metadata"].get("anet.reason")
                         == "queued_for_operator")
        await b.tasks.reply(task["id"], "from the operator")
        await eventually(lambda: state(a, task["id"]) == COMPLETED)


async def test_a_providers_update_reaches_the_client_before_the_disk_and_the_hub_after(
        tmp_path: Path, hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/performance.md, "Durability": what a provider's update tells the requester's client
    goes out before the update's commit is synced; the envelope leaves the hub only after a sync
    that covers the commit, so a crash of the machine that takes the commit brings it again."""
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        b.tasks.trust(a.aid)
        task = await a.tasks.send(b.aid, user_message("hello"))
        await eventually(lambda: b.tasks.inbox())
        steps: list[tuple[str, int]] = []  # what happened, and a's commits by then
        sync_wal, publish, flush = a.store._sync_wal, a.tasks.events.publish, hub.flushes[a.aid]

        def synced() -> None:
            steps.append(("synced", a.store._db.total_changes))
            sync_wal()

        def published(task: dict, events: list) -> None:
            if TaskState(task["status"]["state"]).is_terminal:
                steps.append(("answered", a.store._db.total_changes))
            publish(task, events)

        async def acknowledged(within: float) -> None:  # the hub forgets it once this returned
            await flush(within)
            steps.append(("acknowledged", a.store._db.total_changes))

        monkeypatch.setattr(a.store, "_sync_wal", synced)
        monkeypatch.setattr(a.tasks.events, "publish", published)
        monkeypatch.setitem(hub.flushes, a.aid, acknowledged)
        await b.tasks.reply(task["id"], "hi there")
        await eventually(lambda: [step for step, _ in steps].count("answered") == 1
                         and steps[-1][0] == "acknowledged")
    answered = [step for step, _ in steps].index("answered")
    committed = steps[answered][1]
    acknowledged = [step for step, _ in steps].index("acknowledged", answered)
    assert all(count < committed for step, count in steps[:answered] if step == "synced")
    assert any(step == "synced" and count >= committed
               for step, count in steps[answered:acknowledged])


async def test_the_hub_taking_a_providers_update_costs_the_requester_side_nothing(
        tmp_path: Path, hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    """Both sides share the outbox, and the requester's side follows what the hub took of its
    own messages only: the provider's updates cost it no read of a task."""
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        b.tasks.trust(a.aid)
        task = await a.tasks.send(b.aid, user_message("hello"))
        await eventually(lambda: b.tasks.inbox())
        read_as: list[TaskRole | None] = []
        get_task = b.store.get_task

        def reading(task_id: str, **which: Any) -> StoredTask | None:
            read_as.append(which.get("role"))
            return get_task(task_id, **which)

        monkeypatch.setattr(b.store, "get_task", reading)
        await b.tasks.reply(task["id"], "hi there")
        await eventually(lambda: state(a, task["id"]) == COMPLETED)
        await eventually(lambda: b.store.outbox_due(float("inf")) == [])
    assert TaskRole.PROVIDER in read_as and TaskRole.REQUESTER not in read_as


async def test_a_message_the_hub_takes_at_once_is_deleted_by_the_next_transaction(
        tmp_path: Path, hub: FakeHub) -> None:
    """docs/performance.md, "The sixteenth pass": no commit of its own for an entry whose
    acceptance changes nothing else."""
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        b.tasks.trust(a.aid)
        statements: list[str] = []
        a.store._db.set_trace_callback(statements.append)
        task = await a.tasks.send(b.aid, user_message("hello"))
        await eventually(lambda: b.tasks.inbox())
        assert a.store.outbox_next_attempt() is None  # the hub took it
        await b.tasks.reply(task["id"], "hi there")
        await eventually(lambda: state(a, task["id"]) == COMPLETED)
        await eventually(lambda: any(s.startswith("DELETE FROM outbox WHERE seq IN")
                                     for s in statements))
    assert not any(s.startswith("DELETE FROM outbox WHERE seq =") for s in statements)


async def test_a_record_is_journaled_in_the_commit_of_the_change_it_records(
        tmp_path: Path, hub: FakeHub, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/performance.md, "Durability": a record journaled in a commit of its own, after the
    change's, could be lost to a crash of the machine that keeps the change (and an envelope's
    replay mark with it). When the change's effects run, its records are in the journal."""
    async with open_node(tmp_path / "a", hub) as a, open_node(tmp_path / "b", hub) as b:
        b.tasks.trust(a.aid)
        at_commit: dict[str, list[tuple[list[str], int]]] = {"a": [], "b": []}
        for name, node in (("a", a), ("b", b)):
            services = node.tasks._services

            async def running(effects: Any, node: Any = node, name: str = name,
                              run: Any = services.run) -> None:
                journal = [record.kind for record in node.store.journaled_evidence()]
                at_commit[name].append((journal, len(effects.evidence)))
                await run(effects)

            monkeypatch.setattr(services, "run", running)
        task = await a.tasks.send(b.aid, user_message("hello"))
        await eventually(lambda: b.tasks.inbox())
        await b.tasks.reply(task["id"], "hi there")
        await eventually(lambda: state(a, task["id"]) == COMPLETED)
    for name, kinds in (("a", ("task.forwarded", "task.finished")),
                        ("b", ("task.accepted", "task.answered"))):
        for kind in kinds:
            assert any(kind in journal for journal, _ in at_commit[name]), (name, kind)
        assert all(left == 0 for _, left in at_commit[name]), at_commit[name]


async def test_a_modules_record_is_kept_in_the_commit_of_the_change_it_led_to(
        tmp_path: Path, hub: FakeHub) -> None:
    """Responder.record (docs/plugins.md): a record waits for the task's next change and is
    kept in its transaction, before the change's own records; a change refused (rolled back)
    leaves it for the next one; once the task has ended, a record is kept at once."""

    class Notes:
        @hookimpl
        def anet_take_task(self, node, task: InboundTask) -> TaskClaim:
            async def serve(task: InboundTask, responder: Responder) -> None:
                responder.record("notes.before", {"n": 1})
                with pytest.raises(ValueError, match="parts"):
                    await responder.complete("done", artifacts=[{"artifactId": "a1",
                                                                 "parts": "not a list"}])
                await responder.complete("done")
                responder.record("notes.after", {"n": 2})

            return TaskClaim(module="notes", serve=serve)

    async with open_node(tmp_path / "a", hub) as a, \
            open_node(tmp_path / "b", hub, plugins=plugins_with(Notes())) as b:
        b.tasks.trust(a.aid)
        statements: list[str] = []
        b.store._db.set_trace_callback(statements.append)
        task = await a.tasks.send(b.aid, user_message("hello"))
        await eventually(lambda: state(a, task["id"]) == COMPLETED)
        await eventually(lambda: any("notes.after" in s for s in statements))
    kept = [index for index, s in enumerate(statements)
            if s.startswith("INSERT INTO evidence_journal") and "notes.before" in s]
    assert len(kept) == 1, "kept once, by the change that was not refused"
    begin = max(i for i in range(kept[0]) if statements[i].startswith("BEGIN"))
    commit = next(i for i in range(kept[0], len(statements)) if statements[i] == "COMMIT")
    in_commit = statements[begin:commit]
    assert any(s.startswith("UPDATE tasks SET state = 'TASK_STATE_COMPLETED'") for s in in_commit)
    answered = [i for i, s in enumerate(in_commit) if "'task.answered'" in s]
    assert answered and answered[0] > kept[0] - begin
    chain = (tmp_path / "b" / "evidence" / "chain.jsonl").read_text()
    kinds = [json.loads(line)["kind"] for line in chain.splitlines()]
    assert kinds.count("notes.before") == 1 and kinds.count("notes.after") == 1
    assert kinds.index("notes.before") < kinds.index("task.answered") < kinds.index("notes.after")
