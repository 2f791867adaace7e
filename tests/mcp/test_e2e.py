"""The node as MCP tools, end to end: the official MCP client drives `anet mcp` subprocesses of
alice and bob, whose daemons reach each other through a real hub."""

from __future__ import annotations

import asyncio
import importlib.util
from pathlib import Path

import anyio
import pytest

from tests.mcp.conftest import Network, Tools, mcp_tools
from tests.support.waiting import eventually

pytestmark = pytest.mark.timeout(180)

X402_INSTALLED = importlib.util.find_spec("anet_x402") is not None
"""The module x402 serves its payment tools beside the node's own (tests/x402/test_mcp_tools.py)."""
READ_TOOLS = {"find_agents", "get_agent_card", "get_task", "list_tasks", "list_inbox",
              "list_trusted", "node_status"} | ({"x402_quote", "x402_balance"}
                                                if X402_INSTALLED else set())
ACTING_TOOLS = {"send_task", "cancel_task", "review_agent", "reply_task", "reject_task",
                "trust_agent", "untrust_agent"} | ({"x402_pay"} if X402_INSTALLED else set())


async def inbox_task(bob: Tools, task_id: str) -> dict:
    async def arrived() -> dict | None:
        tasks = (await bob.ok("list_inbox")).structured_content["tasks"]
        return next((task for task in tasks if task["id"] == task_id), None)

    return await eventually(arrived, f"task {task_id} reached bob's inbox")


async def test_find_send_progress_inbox_reply(network: Network, tmp_path: Path) -> None:
    alice_aid, bob_aid = network.alice.aid, network.bob.aid
    async with mcp_tools(network.alice.root, tmp_path / "alice-mcp.log") as alice, \
            mcp_tools(network.bob.root, tmp_path / "bob-mcp.log") as bob:
        listed = {tool.name: tool for tool in (await alice.session.list_tools()).tools}
        assert set(listed) == READ_TOOLS | ACTING_TOOLS
        for name, tool in listed.items():
            assert tool.description and "\n" not in tool.description
            assert tool.input_schema["type"] == "object"
            assert tool.input_schema.get("additionalProperties") is False
            hints = tool.annotations
            assert hints.read_only_hint is (name in READ_TOOLS), name
            if name in ACTING_TOOLS:
                assert hints.open_world_hint is True, name

        status = (await alice.ok("node_status")).structured_content
        assert status["aid"] == alice_aid and status["hub"]["state"] == "registered"
        assert "mcp" in status["modules"] and "a2a" not in status["modules"]

        found = await alice.ok("find_agents", {"limit": 10})
        assert [agent["aid"] for agent in found.structured_content["agents"]] == [bob_aid]
        assert bob_aid in found.content[0].text
        card = await alice.ok("get_agent_card", {"aid": bob_aid})
        assert card.structured_content["verification"] == "VERIFIED"
        assert card.structured_content["card"]["name"] == "bob"

        # alice waits for the answer while bob, on his side, finds the task in his inbox.
        alice.progress.clear()
        async with asyncio.TaskGroup() as group:
            sent = group.create_task(alice.ok("send_task", {
                "aid": bob_aid, "text": "summarize: hubs relay, nodes seal", "timeout": 60},
                timeout=90))
            waiting = await eventually(lambda: alice.progress,
                                       "alice's first progress notification")
            task_id = waiting[0].split()[2]  # "sent task <id> to <aid>"
            arrived = await inbox_task(bob, task_id)
            assert arrived["peer"] == alice_aid
            await eventually(lambda: any("queued_for_operator" in note for note in alice.progress),
                        "alice hears that the task waits for bob's operator")
            replied = await bob.ok("reply_task", {"taskId": task_id, "text": "relayed, sealed"})
            assert replied.structured_content["task"]["status"]["state"] == \
                "TASK_STATE_COMPLETED"
        done = sent.result().structured_content["task"]
        assert done["id"] == task_id and done["status"]["state"] == "TASK_STATE_COMPLETED"
        assert done["metadata"]["anet.receipt_verified"] is True
        assert done["metadata"]["anet.effect_status"] == "done"
        assert done["metadata"]["anet.state_seq"] >= 2
        assert done["artifacts"][0]["parts"] == [{"text": "relayed, sealed"}]
        assert "relayed, sealed" in sent.result().content[0].text
        assert any(note.startswith("artifact 'reply' arrived") for note in alice.progress)
        assert len(alice.progress) == len(set(alice.progress))  # each change once
        assert alice.progress[-1].startswith("completed"), alice.progress

        got = await alice.ok("get_task", {"taskId": task_id})
        assert got.structured_content["task"]["metadata"]["anet.receipt_verified"] is True
        listed_tasks = await alice.ok("list_tasks", {"aid": bob_aid, "state": "completed"})
        assert [task["id"] for task in listed_tasks.structured_content["tasks"]] == [task_id]
        reviewed = await alice.ok("review_agent", {"taskId": task_id, "rating": 5,
                                                   "text": "fast"})
        assert reviewed.structured_content["review"]["subject"] == bob_aid
        again = await alice.call("review_agent", {"taskId": task_id, "rating": 4})
        assert again.is_error and again.structured_content["error"] == "review-duplicate"

        # A question, its answer through taskId, and a new task in the same context.
        asked = await alice.ok("send_task", {"aid": bob_aid, "text": "book a table",
                                             "wait": False})
        question_task = asked.structured_content["task"]["id"]
        await inbox_task(bob, question_task)
        await bob.ok("reply_task", {"taskId": question_task, "text": "for how many?",
                                    "inputRequired": True})
        waited = await alice.ok("get_task", {"taskId": question_task, "wait": True,
                                             "timeout": 30})
        assert waited.structured_content["task"]["status"]["state"] == \
            "TASK_STATE_INPUT_REQUIRED"
        assert "for how many?" in waited.content[0].text and "taskId" in waited.content[0].text
        await alice.ok("send_task", {"aid": bob_aid, "text": "four", "taskId": question_task,
                                     "wait": False})
        answer = await inbox_task(bob, question_task)
        assert [part["text"] for message in answer["history"] for part in message["parts"]][-1] \
            == "four"
        rejected = await bob.ok("reject_task", {"taskId": question_task,
                                                "reason": "fully booked"})
        assert rejected.structured_content["task"]["status"]["state"] == "TASK_STATE_REJECTED"
        ended = await alice.ok("get_task", {"taskId": question_task, "wait": True,
                                            "timeout": 30})
        assert ended.structured_content["task"]["metadata"]["anet.reason"] == \
            "rejected_by_provider"
        context = asked.structured_content["task"]["contextId"]
        follow_up = await alice.ok("send_task", {"aid": bob_aid, "text": "another day?",
                                                 "contextId": context, "wait": False})
        assert follow_up.structured_content["task"]["contextId"] == context
        assert follow_up.structured_content["task"]["id"] != question_task

        # A wait that times out answers with the task as it is, still running.
        gave_up = await alice.ok("send_task", {"aid": bob_aid, "text": "later", "timeout": 1})
        assert gave_up.structured_content["task"]["status"]["state"] == "TASK_STATE_SUBMITTED"
        assert "Still running after the wait" in gave_up.content[0].text

        # A tool call the host cancels stops waiting; the task itself goes on.
        with anyio.move_on_after(2):
            await alice.call("send_task", {"aid": bob_aid, "text": "slow one", "timeout": 120},
                             timeout=60)
            raise AssertionError("the call was to be cancelled while it waited")
        slow = (await alice.ok("list_tasks", {"pageSize": 1})).structured_content["tasks"][0]
        assert slow["status"]["state"] == "TASK_STATE_SUBMITTED"
        await inbox_task(bob, slow["id"])
        canceled = await alice.ok("cancel_task", {"taskId": slow["id"]})
        assert canceled.structured_content["task"]["status"]["state"] == "TASK_STATE_CANCELED"
        assert canceled.structured_content["task"]["metadata"]["anet.reason"] == \
            "canceled_by_requester"

        # The trust list, from bob's side.
        trusted = await bob.ok("list_trusted")
        assert [entry["aid"] for entry in trusted.structured_content["trusted"]] == [alice_aid]
        assert (await bob.ok("untrust_agent", {"aid": alice_aid})).structured_content["changed"]
        assert not (await bob.ok("untrust_agent", {"aid": alice_aid})).structured_content[
            "changed"]
        assert (await bob.ok("trust_agent", {"aid": alice_aid})).structured_content["changed"]


async def test_bad_input_gets_tool_errors_naming_the_value_and_the_fix(
        network: Network, tmp_path: Path) -> None:
    stderr = tmp_path / "alice-mcp.log"
    bob_aid, stranger = network.bob.aid, "a" * 32
    async with mcp_tools(network.alice.root, stderr) as alice:
        for tool, arguments, reference, named, fix in (
                ("send_task", {"aid": bob_aid, "text": "x", "priority": "high"},
                 "invalid-arguments", "'priority'", "send_task takes aid (string, required)"),
                ("review_agent", {"taskId": "abcdefgh12", "rating": "five"},
                 "invalid-arguments", "'five'", "rating (integer 1-5, required)"),
                ("review_agent", {"taskId": "abcdefgh12", "rating": 9},
                 "invalid-arguments", "9", "rating (integer 1-5"),
                ("send_task", {"aid": bob_aid, "text": ["x"], "timeout": "soon"},
                 "invalid-arguments", "'soon'", "timeout (number)"),
                ("send_task", {"text": "x"}, "invalid-arguments", "'aid' is missing",
                 "aid (string, required)"),
                ("list_tasks", {"state": "done"}, "invalid-arguments", "'done'",
                 "state (submitted|working"),
                ("get_agent_card", {"aid": "bob"}, "invalid-arguments", "'bob'", "find_agents"),
                ("get_agent_card", {"aid": stranger}, "unknown-agent", stranger, "find_agents"),
                ("send_task", {"aid": stranger, "text": "hello"}, "unknown-agent", stranger,
                 "find_agents"),
                ("get_task", {"taskId": "no-such-task"}, "task-not-found", "no-such-task",
                 "list_tasks"),
                ("get_task", {"taskId": "../../core/stop"}, "invalid-arguments",
                 "'../../core/stop'", "list_tasks"),
                ("reply_task", {"taskId": "no-such-task", "text": "x"}, "task-not-found",
                 "no-such-task", "list_inbox"),
                ("cancel_task", {"taskId": "no-such-task"}, "task-not-found", "no-such-task",
                 "list_tasks")):
            result = await alice.call(tool, arguments)
            assert result.is_error, (tool, arguments)
            error = result.structured_content
            assert error["error"] == reference, (tool, arguments, error)
            assert named in error["message"], (tool, arguments, error)
            assert fix in error["message"] + error["hint"], (tool, arguments, error)
            assert result.content[0].text.startswith(f"error: {error['message']}")
        with pytest.raises(Exception, match="unknown tool 'no_such_tool'.*find_agents"):
            await alice.session.call_tool("no_such_tool", {})
        assert not (await alice.ok("node_status")).is_error  # still serving
    assert "Traceback" not in stderr.read_text()
    assert network.alice.json("status")["running"]  # ../../core/stop reached nothing
