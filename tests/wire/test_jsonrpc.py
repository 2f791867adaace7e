"""JSON-RPC request parsing, params validation and response building."""

from __future__ import annotations

import json
from typing import Any

import pytest

from anet_core.wire import (
    METHODS,
    A2AError,
    A2AErrorKind,
    A2AMethod,
    GetExtendedAgentCardRequest,
    GetTaskRequest,
    JsonRpcCall,
    JsonRpcRejection,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageRequest,
    SendMessageResponse,
    jsonrpc_result_response,
    parse_params,
    parse_request,
    validate_params,
)


def request(method: str = "GetTask", params: Any = None, **envelope: Any) -> bytes:
    body: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": method, **envelope}
    if params is not None:
        body["params"] = params
    return json.dumps(body).encode()


def rejected(body: bytes | str) -> JsonRpcRejection:
    outcome = parse_request(body)
    assert isinstance(outcome, JsonRpcRejection), outcome
    return outcome


# --- envelope ------------------------------------------------------------------------------------

def test_the_sdk_client_request_is_accepted() -> None:
    body = (b'{"method":"SendMessage","params":{"message":{"messageId":"2395b902",'
            b'"role":"ROLE_USER","parts":[{"text":"hello"}]},"configuration":{}},'
            b'"id":"9170ec12","jsonrpc":"2.0"}')
    call = parse_request(body)
    assert isinstance(call, JsonRpcCall)
    assert (call.id, call.method) == ("9170ec12", A2AMethod.SEND_MESSAGE)
    params = parse_params(call.method, call.params)
    assert isinstance(params, SendMessageRequest) and params.message.parts[0].text == "hello"


@pytest.mark.parametrize("body", [b"{bad", b"", b'{"jsonrpc": "2.0", "id": 1,', b"\xff\xfe{",
                                  b'{"jsonrpc":"2.0","id":1,"method":"GetTask","x":NaN}'])
def test_malformed_json_is_a_parse_error_with_null_id(body: bytes) -> None:
    outcome = rejected(body)
    assert outcome.id is None and outcome.error.kind is A2AErrorKind.PARSE_ERROR
    response = outcome.response()
    assert response["id"] is None and response["error"]["code"] == -32700
    assert "data" not in response["error"]


@pytest.mark.parametrize("body,answer_id,words", [
    (b"[1]", None, "Batch"),
    (b'[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]', None, "Batch"),
    (b"5", None, "JSON object"),
    (b'"GetTask"', None, "JSON object"),
    (b'{"jsonrpc":"1.0","id":1,"method":"GetTask"}', 1, "'1.0'"),
    (b'{"id":1,"method":"GetTask"}', 1, "'jsonrpc'"),
    (b'{"jsonrpc":"2.0","id":true,"method":"GetTask"}', None, "id must be"),
    (b'{"jsonrpc":"2.0","id":1.5,"method":"GetTask"}', None, "1.5"),
    (b'{"jsonrpc":"2.0","id":{"a":1},"method":"GetTask"}', None, "id must be"),
    (b'{"jsonrpc":"2.0","id":1}', 1, "'method'"),
    (b'{"jsonrpc":"2.0","id":"x","method":""}', "x", "'method'"),
    (b'{"jsonrpc":"2.0","id":1,"method":7}', 1, "'method'"),
    (b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":"x"}', 1, "'params'"),
    (b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":3}', 1, "'params'"),
])
def test_wrong_envelopes_are_invalid_requests(body: bytes, answer_id: Any, words: str) -> None:
    outcome = rejected(body)
    assert outcome.error.kind is A2AErrorKind.INVALID_REQUEST
    assert outcome.id == answer_id
    assert words in outcome.error.message
    error = outcome.response()["error"]
    assert error["code"] == -32600 and error["data"][0]["reason"] == "INVALID_REQUEST"


@pytest.mark.parametrize("name", ["message/send", "tasks/get", "sendMessage", "Nope"])
def test_unknown_methods(name: str) -> None:
    outcome = rejected(request(name, {"id": "t"}))
    assert outcome.id == 1 and outcome.error.kind is A2AErrorKind.METHOD_NOT_FOUND
    assert name in outcome.error.message
    assert outcome.response()["error"]["code"] == -32601


def test_array_params_are_invalid_params() -> None:
    outcome = rejected(request("GetTask", ["t"]))
    assert outcome.error.kind is A2AErrorKind.INVALID_PARAMS and outcome.id == 1


@pytest.mark.parametrize("params", [None, {}])
def test_absent_params_read_as_empty(params: Any) -> None:
    body = request("GetExtendedAgentCard", params)
    call = parse_request(body)
    assert isinstance(call, JsonRpcCall) and call.params == {}
    assert isinstance(parse_params(call.method, call.params), GetExtendedAgentCardRequest)


def test_explicit_null_params_and_missing_id() -> None:
    call = parse_request(b'{"jsonrpc":"2.0","method":"GetExtendedAgentCard","params":null}')
    assert isinstance(call, JsonRpcCall) and call.id is None and call.params == {}


def test_ids_are_echoed_unchanged() -> None:
    for request_id in ("abc", 0, -5, 2**40):
        call = parse_request(request(id=request_id))
        assert isinstance(call, JsonRpcCall) and call.id == request_id


# --- params --------------------------------------------------------------------------------------

def test_every_method_has_a_params_model() -> None:
    assert set(METHODS) == set(A2AMethod)
    assert len(METHODS) == 11
    assert {m for m, s in METHODS.items() if s.streaming} == {
        A2AMethod.SEND_STREAMING_MESSAGE, A2AMethod.SUBSCRIBE_TO_TASK}
    assert sum(s.push_config for s in METHODS.values()) == 4


def test_tck_snake_case_params() -> None:
    got = parse_params("GetTask", {"id": "t", "history_length": 2})
    assert isinstance(got, GetTaskRequest) and got.history_length == 2
    listed = parse_params(A2AMethod.LIST_TASKS, {"context_id": "c", "page_size": 5})
    assert isinstance(listed, ListTasksRequest)
    assert (listed.context_id, listed.page_size) == ("c", 5)
    config = parse_params("CreateTaskPushNotificationConfig", {"task_id": "t", "url": "https://h"})
    assert config.wire() == {"taskId": "t", "url": "https://h"}


@pytest.mark.parametrize("method,params,field,value", [
    ("GetTask", {}, "id", None),
    ("GetTask", {"id": 5}, "id", "5"),
    ("GetTask", {"id": "t", "historyLength": "abc"}, "historyLength", "'abc'"),
    ("GetTask", {"id": "t", "historyLength": -1}, "historyLength", "-1"),
    ("ListTasks", {"pageSize": 0}, "pageSize", "0"),
    ("ListTasks", {"pageSize": 500}, "pageSize", "500"),
    ("ListTasks", {"includeArtifacts": "perhaps"}, "includeArtifacts", "'perhaps'"),
    ("SendMessage", {"message": {"role": "ROLE_USER", "parts": [{"text": "x"}]}},
     "message.messageId", None),
    ("SendMessage", {"message": "hello"}, "message", "'hello'"),
    ("SendMessage", {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{}]}},
     "message.parts[0]", None),
    ("SendMessage", {"message": {"messageId": "m", "role": "ROLE_USER", "parts": [{"text": "a"}],
                                 "metadata": [1]}}, "message.metadata", "[1]"),
    ("CancelTask", {"id": ["t"]}, "id", "['t']"),
    ("CreateTaskPushNotificationConfig", {"taskId": "t"}, "url", None),
])
def test_wrong_param_types_are_invalid_params(method: str, params: dict[str, Any], field: str,
                                              value: str | None) -> None:
    with pytest.raises(A2AError) as info:
        parse_params(method, params)
    error = info.value
    assert error.kind is A2AErrorKind.INVALID_PARAMS and error.code == -32602
    assert field in [v.field for v in error.field_violations]
    assert field in error.message
    if value is not None:
        assert value in error.message


def test_parse_params_of_an_unknown_method() -> None:
    with pytest.raises(A2AError) as info:
        parse_params("message/send", {})
    assert info.value.kind is A2AErrorKind.METHOD_NOT_FOUND


def test_validate_params_refuses_a_non_object_body() -> None:
    with pytest.raises(A2AError, match="expected a JSON object, got list"):
        validate_params(GetTaskRequest, [1])  # type: ignore[arg-type]


# --- responses -----------------------------------------------------------------------------------

def test_result_responses() -> None:
    reply = SendMessageResponse(message=Message(message_id="4ecf", context_id="b24e",
                                                task_id="1bb3", role=Role.ROLE_AGENT,
                                                parts=[Part(text="direct: msg hi")]))
    expected = json.loads(
        '{"result":{"message":{"messageId":"4ecf","contextId":"b24e","taskId":"1bb3",'
        '"role":"ROLE_AGENT","parts":[{"text":"direct: msg hi"}]}},"id":1,"jsonrpc":"2.0"}')
    assert jsonrpc_result_response(1, reply) == expected
    assert jsonrpc_result_response("x", None) == {"jsonrpc": "2.0", "id": "x", "result": None}
    assert jsonrpc_result_response(2, {}) == {"jsonrpc": "2.0", "id": 2, "result": {}}
