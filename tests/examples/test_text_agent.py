"""The text agent through the official a2a-sdk client, over its unix socket, with its token."""

from __future__ import annotations

from typing import Any

import pytest
from a2a.client import (
    A2ACardResolver,
    A2AClientError,
    AgentCardResolutionError,
    ClientConfig,
    ClientFactory,
)
from a2a.helpers import get_artifact_text, get_data_parts, get_message_text
from a2a.types import CancelTaskRequest, GetTaskRequest, Role, StreamResponse, Task, TaskState
from a2a.utils.errors import TaskNotCancelableError

from examples.agent_server import UNIX_SOCKET_BASE_URL
from tests.examples.agents import BINDINGS, RunningAgent, send
from tests.support.messages import sdk_user_message

pytestmark = pytest.mark.timeout(60)

ARTICLE = (
    "Hubs relay sealed envelopes between nodes. A hub never sees the content of an envelope. "
    "Each node runs a local endpoint for its user.\n\n"
    "Nodes find agents through the hub directory. The weather was pleasant on Tuesday. "
    "Envelopes between nodes are sealed, and the hub relays envelopes it cannot read."
)


def only_task(events: list[StreamResponse]) -> Task:
    assert [e.WhichOneof("payload") for e in events] == ["task"]
    return events[0].task


def reply_and_numbers(task: Task) -> tuple[str, dict[str, Any]]:
    """The reply text and the numbers, checking that the reply artifact comes first."""
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    reply, numbers = task.artifacts
    assert reply.name == "reply"
    (data,) = get_data_parts(numbers.parts)
    return get_artifact_text(reply), data


async def test_card_lists_three_skills_and_the_bearer_scheme(
        text_agent_server: RunningAgent) -> None:
    async with text_agent_server.http(**{"A2A-Version": "1.0"}) as http:
        response = await http.get("/.well-known/agent-card.json")
    assert response.status_code == 200
    card = response.json()
    assert [skill["id"] for skill in card["skills"]] == ["stats", "summarize", "transform"]
    for skill in card["skills"]:
        assert skill["name"] and skill["description"] and skill["tags"] and skill["examples"]
    assert card["capabilities"]["streaming"] is True
    assert card["securitySchemes"]["bearer"]["httpAuthSecurityScheme"]["scheme"] == "Bearer"
    assert [i["url"] for i in card["supportedInterfaces"]] == [
        "http://localhost/a2a/jsonrpc", "http://localhost/a2a/rest"]


@pytest.mark.parametrize("path,method", [("/.well-known/agent-card.json", "GET"),
                                         ("/a2a/jsonrpc", "POST"),
                                         ("/a2a/rest/message:send", "POST"),
                                         ("/no/such/route", "GET")])
@pytest.mark.parametrize("token", [None, "wrong-token"])
async def test_every_request_needs_the_token(text_agent_server: RunningAgent, path: str,
                                             method: str, token: str | None) -> None:
    async with text_agent_server.http() as http:
        headers = {"A2A-Version": "1.0"}
        if token is None:
            del http.headers["Authorization"]
        else:
            headers["Authorization"] = f"Bearer {token}"
        response = await http.request(method, path, headers=headers, json={})
    assert response.status_code == 401
    assert response.headers["WWW-Authenticate"].startswith("Bearer realm=")


async def test_the_sdk_client_gets_401_with_a_wrong_token(
        text_agent_server: RunningAgent) -> None:
    async with text_agent_server.http() as http:
        card = await A2ACardResolver(http, UNIX_SOCKET_BASE_URL).get_agent_card()
    async with text_agent_server.http(token="wrong") as http:
        with pytest.raises(AgentCardResolutionError, match="401"):
            await A2ACardResolver(http, UNIX_SOCKET_BASE_URL).get_agent_card()
        client = ClientFactory(ClientConfig(httpx_client=http, streaming=False)).create(card)
        with pytest.raises(A2AClientError, match="401"):
            await send(client, sdk_user_message("hello"))


async def test_a2a_version_is_required_as_the_sdk_does(text_agent_server: RunningAgent) -> None:
    body = {"jsonrpc": "2.0", "id": 1, "method": "GetTask", "params": {"id": "x"}}
    async with text_agent_server.http() as http:
        response = await http.post("/a2a/jsonrpc", json=body)
    assert response.json()["error"]["code"] == -32009


@pytest.mark.parametrize("binding", BINDINGS)
async def test_stats_by_metadata(text_agent_server: RunningAgent, binding: str) -> None:
    async with text_agent_server.client(binding) as client:
        events = await send(client, sdk_user_message(ARTICLE, metadata={"skill": "stats"}))
    reply, numbers = reply_and_numbers(only_task(events))
    assert numbers["words"] == 50
    assert numbers["sentences"] == 6
    assert numbers["paragraphs"] == 2
    assert numbers["characters"] == len(ARTICLE)
    assert numbers["readingTimeSeconds"] == 13  # 50 words at 238 words a minute, rounded up
    # Ties keep the order of first appearance; numbers arrive as floats (protobuf Value).
    assert numbers["topWords"][:3] == [{"word": "envelopes", "count": 3.0},
                                       {"word": "nodes", "count": 3.0},
                                       {"word": "hub", "count": 3.0}]
    assert reply.startswith("50 words, 6 sentences, 2 paragraphs")


async def test_plain_text_gets_the_default_skill_stats(text_agent_server: RunningAgent) -> None:
    async with text_agent_server.client() as client:
        events = await send(client, sdk_user_message("Count these four words."))
    _, numbers = reply_and_numbers(only_task(events))
    assert numbers["words"] == 4


@pytest.mark.parametrize("binding", BINDINGS)
async def test_summarize_by_command_word(text_agent_server: RunningAgent, binding: str) -> None:
    async with text_agent_server.client(binding) as client:
        events = await send(client, sdk_user_message("summarize 2: " + ARTICLE))
    reply, numbers = reply_and_numbers(only_task(events))
    assert reply == ("Hubs relay sealed envelopes between nodes. Envelopes between nodes are "
                     "sealed, and the hub relays envelopes it cannot read.")
    assert numbers["sentences"] == 2 and numbers["ofSentences"] == 6
    assert "weather" not in reply


@pytest.mark.parametrize("mode,text,expected", [
    ("upper", "Hello world", "HELLO WORLD"),
    ("lower", "Hello World", "hello world"),
    ("title", "hello wide world", "Hello Wide World"),
    ("slug", "Héllo, Wörld: A2A!", "hello-world-a2a"),
    ("reverse-lines", "one\ntwo\nthree", "three\ntwo\none"),
    ("sort-lines", "pear\napple\nBanana", "apple\nBanana\npear"),
    ("dedupe-lines", "a\nb\na\nc\nb", "a\nb\nc"),
])
async def test_transform_modes(text_agent_server: RunningAgent, mode: str, text: str,
                               expected: str) -> None:
    async with text_agent_server.client() as client:
        by_metadata = await send(client, sdk_user_message(
            text, metadata={"skill": "transform", "mode": mode}))
        by_command = await send(client, sdk_user_message(f"transform {mode}: {text}"))
    for events in (by_metadata, by_command):
        reply, numbers = reply_and_numbers(only_task(events))
        assert reply == expected
        assert numbers["mode"] == mode


@pytest.mark.parametrize("binding", BINDINGS)
async def test_streaming_order(text_agent_server: RunningAgent, binding: str) -> None:
    async with text_agent_server.client(binding, streaming=True) as client:
        events = await send(client, sdk_user_message("summarize 1: " + ARTICLE))
    kinds = [event.WhichOneof("payload") for event in events]
    assert kinds == ["task", "status_update", "artifact_update", "artifact_update",
                     "status_update"]
    assert events[0].task.status.state == TaskState.TASK_STATE_SUBMITTED
    assert events[1].status_update.status.state == TaskState.TASK_STATE_WORKING
    assert events[2].artifact_update.artifact.name == "reply"
    assert events[3].artifact_update.artifact.name == "summarize"
    assert events[4].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    task_id = events[0].task.id
    assert all(getattr(e, e.WhichOneof("payload")).task_id == task_id for e in events[1:])


@pytest.mark.parametrize("binding", BINDINGS)
async def test_empty_text_asks_for_input_then_continues_the_same_task(
        text_agent_server: RunningAgent, binding: str) -> None:
    async with text_agent_server.client(binding) as client:
        first = only_task(await send(client, sdk_user_message("summarize 1")))
        assert first.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        assert get_message_text(first.status.message) == "Send the text to summarise."
        follow_up = sdk_user_message(ARTICLE, task_id=first.id, context_id=first.context_id)
        second = only_task(await send(client, follow_up))
        assert second.id == first.id
        reply, numbers = reply_and_numbers(second)
        assert numbers["sentences"] == 1
        assert reply == ("Envelopes between nodes are sealed, and the hub relays envelopes it "
                         "cannot read.")
        stored = await client.get_task(GetTaskRequest(id=first.id))
    user_turns = [m.message_id for m in stored.history if m.role == Role.ROLE_USER]
    assert user_turns == [first.history[0].message_id, follow_up.message_id]


async def test_empty_message_with_metadata_keeps_the_transform_mode(
        text_agent_server: RunningAgent) -> None:
    async with text_agent_server.client() as client:
        first = only_task(await send(client, sdk_user_message(
            " ", metadata={"skill": "transform", "mode": "upper"})))
        assert first.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        second = only_task(await send(client, sdk_user_message("quiet", task_id=first.id)))
    assert reply_and_numbers(second)[0] == "QUIET"


async def test_follow_ups_that_name_only_the_task_keep_its_context(
        text_agent_server: RunningAgent) -> None:
    async with text_agent_server.client() as client:
        first = only_task(await send(client, sdk_user_message("transform slug")))
        second = only_task(await send(client, sdk_user_message(" ", task_id=first.id)))
        assert second.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        third = only_task(await send(client, sdk_user_message("Still Here", task_id=first.id)))
    assert third.context_id == first.context_id
    assert reply_and_numbers(third)[0] == "still-here"


async def test_cancel_a_task_waiting_for_input(text_agent_server: RunningAgent) -> None:
    async with text_agent_server.client() as client:
        waiting = only_task(await send(client, sdk_user_message("stats")))
        assert waiting.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        canceled = await client.cancel_task(CancelTaskRequest(id=waiting.id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        stored = await client.get_task(GetTaskRequest(id=waiting.id))
        assert stored.status.state == TaskState.TASK_STATE_CANCELED
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=waiting.id))


@pytest.mark.parametrize("metadata,reason", [
    ({"skill": "translate"}, "unknown skill 'translate'; this agent offers: stats, summarize"),
    ({"skill": "transform"}, "transform needs a mode"),
    ({"skill": "transform", "mode": "shout"}, "unknown transform mode 'shout'"),
    ({"skill": "summarize", "sentences": 0}, "sentences must be a whole number from 1 to 50"),
])
async def test_unusable_requests_are_rejected_with_the_reason(
        text_agent_server: RunningAgent, metadata: dict[str, object], reason: str) -> None:
    async with text_agent_server.client() as client:
        task = only_task(await send(client, sdk_user_message("some text", metadata=metadata)))
    assert task.status.state == TaskState.TASK_STATE_REJECTED
    assert reason in get_message_text(task.status.message)
