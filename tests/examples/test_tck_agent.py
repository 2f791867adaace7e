"""The TCK scenario agent: every messageId prefix of the kit's scenario table, through the SDK."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Callable

import pytest
from a2a.helpers import get_data_parts, get_message_text
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    Part,
    Role,
    StreamResponse,
    SubscribeToTaskRequest,
    Task,
    TaskState,
)

from tests.examples.agents import (
    BINDINGS,
    CALL_TIMEOUT_S,
    RunningAgent,
    send,
)
from tests.support.messages import sdk_user_message

pytestmark = pytest.mark.timeout(60)

COMPLETED = TaskState.TASK_STATE_COMPLETED
WORKING = TaskState.TASK_STATE_WORKING


def scenario_id(prefix: str) -> str:
    """A messageId the way the kit makes them: the prefix, then a session suffix."""
    return f"{prefix}-{secrets.token_hex(4)}"


def final_task(events: list[StreamResponse]) -> Task:
    assert [e.WhichOneof("payload") for e in events] == ["task"]
    return events[0].task


def only_part(task: Task) -> Part:
    (artifact,) = task.artifacts
    (part,) = artifact.parts
    return part


def is_text(expected: str) -> Callable[[Part], bool]:
    return lambda part: part.text == expected


def is_output_file(part: Part) -> bool:
    return (part.raw, part.filename, part.media_type) == (b"tck", "output.txt", "text/plain")


def is_output_url(part: Part) -> bool:
    return (part.url, part.filename, part.media_type) == (
        "https://example.com/output.txt", "output.txt", "text/plain")


def is_tck_data(part: Part) -> bool:
    return get_data_parts([part]) == [{"key": "value", "count": 42.0}]


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("prefix,state,status_text", [
    ("tck-complete-task", COMPLETED, "Hello from TCK"),
    ("tck-input-required", TaskState.TASK_STATE_INPUT_REQUIRED, "Input required"),
    ("tck-reject-task", TaskState.TASK_STATE_REJECTED, "rejected"),
    ("anything-else", COMPLETED, "echo: ping"),
])
async def test_state_scenarios(tck_agent_server: RunningAgent, binding: str, prefix: str,
                               state: TaskState, status_text: str) -> None:
    async with tck_agent_server.client(binding) as client:
        task = final_task(await send(client, sdk_user_message("ping", scenario_id(prefix))))
    assert task.status.state == state
    assert get_message_text(task.status.message) == status_text


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("prefix,part_is", [
    ("tck-artifact-text", is_text("Generated text content")),
    ("tck-artifact-file", is_output_file),
    ("tck-artifact-file-url", is_output_url),
    ("tck-artifact-data", is_tck_data),
])
async def test_artifact_scenarios(tck_agent_server: RunningAgent, binding: str, prefix: str,
                                  part_is: Callable[[Part], bool]) -> None:
    async with tck_agent_server.client(binding) as client:
        task = final_task(await send(client, sdk_user_message("ping", scenario_id(prefix))))
    assert task.status.state == COMPLETED
    assert part_is(only_part(task))


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("streaming", [False, True])
async def test_message_response_is_a_message_not_a_task(
        tck_agent_server: RunningAgent, binding: str, streaming: bool) -> None:
    async with tck_agent_server.client(binding, streaming=streaming) as client:
        events = await send(client, sdk_user_message("ping", scenario_id("tck-message-response")))
    assert [e.WhichOneof("payload") for e in events] == ["message"]
    assert get_message_text(events[0].message) == "Direct message response"


def stream_shape(events: list[StreamResponse]) -> list[str]:
    """Each event as its kind, with the state of status updates: 'status:WORKING'."""
    shape = []
    for event in events:
        kind = event.WhichOneof("payload")
        if kind == "status_update":
            kind = "status:" + TaskState.Name(event.status_update.status.state)[11:]
        shape.append(kind)
    return shape


WORKING_ARTIFACT_COMPLETED = ["task", "status:WORKING", "artifact_update", "status:COMPLETED"]


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("prefix,part_is", [
    ("tck-stream-001", is_text("Stream hello from TCK")),
    ("tck-stream-003", is_text("Stream task lifecycle")),
    ("tck-stream-ordering-001", is_text("Ordered output")),
    ("tck-stream-artifact-text", is_text("Streamed text content")),
    ("tck-stream-artifact-file", is_output_file),
])
async def test_streams_working_artifact_completed(tck_agent_server: RunningAgent, binding: str,
                                                  prefix: str,
                                                  part_is: Callable[[Part], bool]) -> None:
    async with tck_agent_server.client(binding, streaming=True) as client:
        events = await send(client, sdk_user_message("ping", scenario_id(prefix)))
    assert stream_shape(events) == WORKING_ARTIFACT_COMPLETED
    (part,) = events[2].artifact_update.artifact.parts
    assert part_is(part)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_stream_002_completes_at_once(tck_agent_server: RunningAgent, binding: str) -> None:
    async with tck_agent_server.client(binding, streaming=True) as client:
        events = await send(client, sdk_user_message("ping", scenario_id("tck-stream-002")))
    assert stream_shape(events) == ["task", "status:COMPLETED"]


@pytest.mark.parametrize("binding", BINDINGS)
async def test_chunked_artifact_appends_to_one_artifact(tck_agent_server: RunningAgent,
                                                        binding: str) -> None:
    async with tck_agent_server.client(binding, streaming=True) as client:
        events = await send(client, sdk_user_message(
            "ping", scenario_id("tck-stream-artifact-chunked")))
        assert stream_shape(events) == ["task", "status:WORKING", "artifact_update",
                                        "artifact_update", "status:COMPLETED"]
        first, second = (e.artifact_update for e in events[2:4])
        assert first.artifact.artifact_id == second.artifact.artifact_id
        assert (first.append, first.last_chunk) == (False, False)
        assert (second.append, second.last_chunk) == (True, True)
        stored = await client.get_task(GetTaskRequest(id=events[0].task.id))
    assert [p.text for p in only_artifact_parts(stored)] == ["chunk-1 ", "chunk-2"]


def only_artifact_parts(task: Task) -> list[Part]:
    (artifact,) = task.artifacts
    return list(artifact.parts)


@pytest.mark.parametrize("binding", BINDINGS)
async def test_resubscribe_task_works_then_completes(tck_agent_server: RunningAgent,
                                                     binding: str) -> None:
    message_id = scenario_id("test-resubscribe-message-id")
    async with tck_agent_server.client(binding) as client:
        started = final_task(await send(client, sdk_user_message("ping", message_id),
                                        return_immediately=True))
    assert started.status.state in (TaskState.TASK_STATE_SUBMITTED, WORKING)
    async with tck_agent_server.client(binding, streaming=True) as client:
        async with asyncio.timeout(CALL_TIMEOUT_S):
            events = [e async for e in client.subscribe(SubscribeToTaskRequest(id=started.id))]
    assert events[0].WhichOneof("payload") == "task"
    assert events[0].task.status.state == WORKING
    assert stream_shape(events)[-1] == "status:COMPLETED"


async def test_input_required_task_can_be_canceled(tck_agent_server: RunningAgent) -> None:
    async with tck_agent_server.client() as client:
        waiting = final_task(await send(client, sdk_user_message(
            "ping", scenario_id("tck-input-required"))))
        canceled = await client.cancel_task(CancelTaskRequest(id=waiting.id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED


async def test_running_task_can_be_canceled(tck_agent_server: RunningAgent) -> None:
    async with tck_agent_server.client() as client:
        running = final_task(await send(client, sdk_user_message(
            "ping", scenario_id("test-resubscribe-message-id")), return_immediately=True))
        canceled = await client.cancel_task(CancelTaskRequest(id=running.id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED


async def test_follow_up_on_input_required_task_runs_its_own_scenario(
        tck_agent_server: RunningAgent) -> None:
    async with tck_agent_server.client() as client:
        waiting = final_task(await send(client, sdk_user_message(
            "ping", scenario_id("tck-input-required"))))
        done = final_task(await send(client, sdk_user_message(
            "more", scenario_id("tck-complete-task"), task_id=waiting.id)))
    assert done.id == waiting.id and done.status.state == COMPLETED
    said = [get_message_text(m) for m in done.history if m.role == Role.ROLE_USER]
    assert said[-2:] == ["ping", "more"]


async def test_jsonrpc_is_served_with_a_trailing_slash_too(
        tck_agent_server: RunningAgent) -> None:
    body = {"jsonrpc": "2.0", "id": 7, "method": "SendMessage", "params": {"message": {
        "role": "ROLE_USER", "messageId": scenario_id("tck-complete-task"),
        "parts": [{"text": "hi"}]}}}
    async with tck_agent_server.http(**{"A2A-Version": "1.0"}) as http:
        response = await http.post("/a2a/jsonrpc/", json=body)
    assert response.json()["result"]["task"]["status"]["state"] == "TASK_STATE_COMPLETED"


async def test_follow_ups_that_name_only_the_task_keep_its_context(
        tck_agent_server: RunningAgent) -> None:
    # The kit's history checks: several turns on one task, none of them with a contextId.
    async with tck_agent_server.client() as client:
        first = final_task(await send(client, sdk_user_message(
            "start", scenario_id("tck-input-required"))))
        for text in ("one", "two"):
            again = final_task(await send(client, sdk_user_message(
                text, scenario_id("tck-input-required"), task_id=first.id)))
            assert again.status.state == TaskState.TASK_STATE_INPUT_REQUIRED
        done = final_task(await send(client, sdk_user_message(
            "end", scenario_id("tck-complete-task"), task_id=first.id)))
    assert done.status.state == COMPLETED
    assert done.context_id == first.context_id
    said = [get_message_text(m) for m in done.history if m.role == Role.ROLE_USER]
    assert said == ["start", "one", "two", "end"]
