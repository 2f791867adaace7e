"""Behaviour of the wire models that needs no oracle: presence rules, input spellings,
validation messages, timestamps, bytes, enums."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

import pytest
from pydantic import ValidationError

from anet_core.wire import (
    ACTIVE_TASK_STATES,
    INTERRUPTED_TASK_STATES,
    TERMINAL_TASK_STATES,
    AgentCard,
    GetTaskRequest,
    ListTasksRequest,
    ListTasksResponse,
    Message,
    Part,
    Role,
    SecurityScheme,
    SendMessageRequest,
    StreamResponse,
    Task,
    TaskState,
    TaskStatus,
    TaskStatusUpdateEvent,
    format_timestamp,
    parse_timestamp,
)


def user_message(**extra: object) -> dict[str, object]:
    return {"messageId": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}], **extra}


def test_unset_and_default_fields_are_left_out() -> None:
    message = Message(message_id="m", role=Role.ROLE_AGENT, parts=[Part(text="x")])
    assert message.wire() == {"messageId": "m", "role": "ROLE_AGENT", "parts": [{"text": "x"}]}


def test_set_struct_is_written_even_when_empty() -> None:
    message = Message(message_id="m", role=Role.ROLE_USER, parts=[Part(text="")], metadata={})
    # An empty text is still the set oneof member; an empty Struct is still a set message.
    assert message.wire()["parts"] == [{"text": ""}]
    assert message.wire()["metadata"] == {}


def test_optional_scalars_are_written_at_their_default() -> None:
    assert GetTaskRequest(id="t", history_length=0).wire() == {"id": "t", "historyLength": 0}
    assert GetTaskRequest(id="t").wire() == {"id": "t"}
    assert ListTasksRequest(include_artifacts=False).wire() == {"includeArtifacts": False}


def test_unspecified_enum_is_left_out() -> None:
    assert ListTasksRequest(status=TaskState.TASK_STATE_UNSPECIFIED).wire() == {}
    working = {"status": "TASK_STATE_WORKING"}
    assert ListTasksRequest.from_wire(working).wire() == working


def test_snake_and_camel_keys_are_both_accepted_and_unknown_keys_ignored() -> None:
    camel = SendMessageRequest.from_wire({"message": user_message(contextId="c"),
                                          "configuration": {"historyLength": 3}})
    snake = SendMessageRequest.from_wire({
        "message": {"message_id": "m-1", "role": "ROLE_USER", "parts": [{"text": "hi"}],
                    "context_id": "c", "kind": "message"},
        "configuration": {"history_length": 3, "blocking": True}, "somethingNew": 1})
    assert camel.wire() == snake.wire()
    assert "kind" not in snake.wire()["message"]
    assert snake.configuration is not None and snake.configuration.history_length == 3


def test_output_never_has_snake_case_keys() -> None:
    task = Task.from_wire({"id": "t", "context_id": "c", "status": {"state": "TASK_STATE_WORKING"},
                           "history": [user_message(reference_task_ids=["x"])]})
    text = task.wire_json()
    assert "_id" not in text and "reference_task" not in text
    assert '"contextId":"c"' in text and '"referenceTaskIds":["x"]' in text


def test_enums_accept_names_and_numbers_and_refuse_unknown_names() -> None:
    assert Message.from_wire(user_message(role=2)).role is Role.ROLE_AGENT
    with pytest.raises(ValidationError) as info:
        Message.from_wire(user_message(role="user"))
    assert "role" in str(info.value) and "ROLE_USER" in str(info.value)


def test_message_requires_id_role_and_a_part() -> None:
    with pytest.raises(ValidationError) as info:
        Message.from_wire({"role": "ROLE_UNSPECIFIED", "parts": []})
    fields = {err["loc"][0] for err in info.value.errors()}
    assert fields == {"messageId", "role", "parts"}


@pytest.mark.parametrize("part", [{}, {"text": "a", "url": "b"}, {"text": "a", "data": None},
                                  {"filename": "f.txt"}])
def test_part_needs_exactly_one_content(part: dict[str, object]) -> None:
    with pytest.raises(ValidationError, match="exactly one of text, raw, url, data"):
        Part.from_wire(part)


def test_data_part_keeps_any_json_value_including_null() -> None:
    for value in ({"a": 1}, [1, "x"], "s", 3, True, None):
        part = Part.from_wire({"data": value})
        assert part.kind == "data" and part.wire() == {"data": value}


def test_raw_part_accepts_url_safe_and_unpadded_base64_and_writes_standard() -> None:
    payload = b"\xfb\xff\xfe"
    assert Part.from_wire({"raw": "-__-"}).raw == payload
    assert Part.from_wire({"raw": "+//+"}).wire() == {"raw": "+//+"}
    assert Part.from_wire({"raw": "AP9o"}).raw == b"\x00\xffh"
    assert Part(raw=b"ab").wire() == {"raw": "YWI="}
    with pytest.raises(ValidationError, match="not valid base64"):
        Part.from_wire({"raw": "not base64!"})


@pytest.mark.parametrize("text,expected", [
    ("2026-01-01T00:00:00Z", datetime(2026, 1, 1, tzinfo=UTC)),
    ("2026-01-01T00:00:00.5Z", datetime(2026, 1, 1, 0, 0, 0, 500000, tzinfo=UTC)),
    ("2026-01-01T00:00:00.123456789Z", datetime(2026, 1, 1, 0, 0, 0, 123456, tzinfo=UTC)),
    ("2026-01-01T02:00:00+02:00", datetime(2026, 1, 1, tzinfo=UTC)),
    ("2025-12-31T23:30:00-00:30", datetime(2026, 1, 1, tzinfo=UTC)),
])
def test_timestamps_in(text: str, expected: datetime) -> None:
    parsed = parse_timestamp(text)
    assert parsed == expected and parsed.tzinfo is UTC


@pytest.mark.parametrize("bad", ["2026-01-01", "2026-01-01T00:00:00", "2026-13-01T00:00:00Z",
                                 "yesterday", 1700000000])
def test_bad_timestamps_are_refused_with_the_value(bad: object) -> None:
    with pytest.raises(ValidationError) as info:
        TaskStatus.from_wire({"state": "TASK_STATE_WORKING", "timestamp": bad})
    assert "timestamp" in str(info.value)


def test_timestamps_out() -> None:
    base = datetime(2026, 1, 1, tzinfo=UTC)
    assert format_timestamp(base) == "2026-01-01T00:00:00Z"
    assert format_timestamp(base + timedelta(milliseconds=736)) == "2026-01-01T00:00:00.736Z"
    assert format_timestamp(base + timedelta(microseconds=736571)) == "2026-01-01T00:00:00.736571Z"
    plus_two = datetime(2026, 1, 1, 2, tzinfo=timezone(timedelta(hours=2)))
    assert format_timestamp(plus_two) == "2026-01-01T00:00:00Z"
    status = TaskStatus(state=TaskState.TASK_STATE_WORKING, timestamp=base)
    assert status.wire()["timestamp"] == "2026-01-01T00:00:00Z"
    with pytest.raises(ValueError, match="time zone"):
        format_timestamp(datetime(2026, 1, 1))


def test_terminal_and_interrupted_states() -> None:
    assert {s.name for s in TERMINAL_TASK_STATES} == {
        "TASK_STATE_COMPLETED", "TASK_STATE_FAILED", "TASK_STATE_CANCELED", "TASK_STATE_REJECTED"}
    assert {s.name for s in INTERRUPTED_TASK_STATES} == {
        "TASK_STATE_INPUT_REQUIRED", "TASK_STATE_AUTH_REQUIRED"}
    assert TaskState.TASK_STATE_CANCELED.is_terminal
    assert not TaskState.TASK_STATE_WORKING.is_terminal
    assert TaskState.TASK_STATE_AUTH_REQUIRED.is_interrupted
    assert TaskState.TASK_STATE_COMPLETED.number == 3


def test_every_state_is_active_settled_or_unspecified() -> None:
    assert {s.name for s in ACTIVE_TASK_STATES} == {"TASK_STATE_SUBMITTED", "TASK_STATE_WORKING"}
    for state in TaskState:
        kinds = [state.is_active, state.is_settled, state is TaskState.TASK_STATE_UNSPECIFIED]
        assert kinds.count(True) == 1, state
    assert TaskState.TASK_STATE_INPUT_REQUIRED.is_settled
    assert TaskState.TASK_STATE_INPUT_REQUIRED.word == "input-required"
    assert TaskState.TASK_STATE_COMPLETED.word == "completed"


def test_stream_response_needs_exactly_one_member() -> None:
    with pytest.raises(ValidationError, match="one of task, message, statusUpdate"):
        StreamResponse.from_wire({})
    both = {"task": {"id": "t", "status": {"state": "TASK_STATE_WORKING"}},
            "message": user_message()}
    with pytest.raises(ValidationError, match="got task and message"):
        StreamResponse.from_wire(both)


def test_stream_response_wraps_each_event_type() -> None:
    event = TaskStatusUpdateEvent(task_id="t", context_id="c",
                                  status=TaskStatus(state=TaskState.TASK_STATE_COMPLETED))
    wrapped = StreamResponse.of(event)
    assert wrapped.kind == "statusUpdate" and wrapped.payload is event
    assert wrapped.wire() == {"statusUpdate": {
        "taskId": "t", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"}}}


def test_list_tasks_response_shows_all_four_keys_on_an_empty_page() -> None:
    assert ListTasksResponse(page_size=50).wire() == {
        "tasks": [], "nextPageToken": "", "pageSize": 50, "totalSize": 0}


@pytest.mark.parametrize("params,field", [
    ({"pageSize": 0}, "pageSize"), ({"pageSize": 101}, "pageSize"),
    ({"historyLength": -1}, "historyLength"), ({"status": "TASK_STATE_DONE"}, "status"),
    ({"statusTimestampAfter": "soon"}, "statusTimestampAfter"),
])
def test_list_tasks_request_ranges(params: dict[str, object], field: str) -> None:
    with pytest.raises(ValidationError) as info:
        ListTasksRequest.from_wire(params)
    assert [err["loc"] for err in info.value.errors()] == [(field,)]


def test_list_tasks_request_default_page_size() -> None:
    assert ListTasksRequest().effective_page_size == 50
    assert ListTasksRequest(page_size=7).effective_page_size == 7


def test_bearer_scheme_shape() -> None:
    scheme = SecurityScheme.bearer(description="local token")
    assert scheme.wire() == {"httpAuthSecurityScheme": {"scheme": "Bearer",
                                                        "description": "local token"}}


def test_card_security_requirement_scope_list_spellings() -> None:
    card = AgentCard.from_wire({
        "name": "n", "description": "d", "version": "1",
        "securityRequirements": [{"schemes": {"a": {"list": []}, "b": {}, "c": {"list": ["s"]}}}],
    })
    assert card.wire()["securityRequirements"] == [{"schemes": {"a": {}, "b": {},
                                                                "c": {"list": ["s"]}}}]
    assert card.wire()["capabilities"] == {}


def test_own_output_reads_back_when_optional_strings_are_empty() -> None:
    card = AgentCard(name="n", version="1", skills=[{"id": "s", "name": "S"}])  # type: ignore[list-item]
    assert card.wire() == {"name": "n", "version": "1", "capabilities": {},
                           "skills": [{"id": "s", "name": "S"}]}
    assert AgentCard.from_wire(card.wire()) == card


def test_importing_the_package_pulls_in_neither_the_sdk_nor_protobuf() -> None:
    probe = ("import sys, anet_core.wire; "
             "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('a2a', 'google')); "
             "print(bad); sys.exit(1 if bad else 0)")
    repo = str(Path(__file__).resolve().parents[2])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        filter(None, [repo, os.environ.get("PYTHONPATH")]))}
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True,
                            check=False, timeout=60, env=env)
    assert result.returncode == 0, result.stdout + result.stderr
