"""The error catalogue against the A2A specification's error table and exact example bodies."""

from __future__ import annotations

import json

import pytest
from pydantic import ValidationError

from anet_core.wire import (
    A2AError,
    A2AErrorKind,
    FieldViolation,
    SendMessageRequest,
    error_from_jsonrpc,
    error_from_rest,
    invalid_params,
    jsonrpc_error_object,
    jsonrpc_error_response,
    rest_error_body,
)

# The error table of https://a2a-protocol.org/latest/specification/, transcribed row by row:
# name, code, reason, http (spec >= 1.0.1), grpc status, http (spec 1.0.0 / TCK).
MASTER_TABLE: list[tuple[str, int, str, int, str, int]] = [
    ("TaskNotFoundError", -32001, "TASK_NOT_FOUND", 404, "NOT_FOUND", 404),
    ("TaskNotCancelableError", -32002, "TASK_NOT_CANCELABLE", 400, "FAILED_PRECONDITION", 409),
    ("PushNotificationNotSupportedError", -32003, "PUSH_NOTIFICATION_NOT_SUPPORTED", 400,
     "FAILED_PRECONDITION", 400),
    ("UnsupportedOperationError", -32004, "UNSUPPORTED_OPERATION", 400, "FAILED_PRECONDITION",
     400),
    ("ContentTypeNotSupportedError", -32005, "CONTENT_TYPE_NOT_SUPPORTED", 400,
     "INVALID_ARGUMENT", 415),
    ("InvalidAgentResponseError", -32006, "INVALID_AGENT_RESPONSE", 500, "INTERNAL", 502),
    ("ExtendedAgentCardNotConfiguredError", -32007, "EXTENDED_AGENT_CARD_NOT_CONFIGURED", 400,
     "FAILED_PRECONDITION", 400),
    ("ExtensionSupportRequiredError", -32008, "EXTENSION_SUPPORT_REQUIRED", 400,
     "FAILED_PRECONDITION", 400),
    ("VersionNotSupportedError", -32009, "VERSION_NOT_SUPPORTED", 400, "FAILED_PRECONDITION",
     400),
    ("JSONParseError", -32700, "INVALID_REQUEST", 400, "INVALID_ARGUMENT", 400),
    ("InvalidRequestError", -32600, "INVALID_REQUEST", 400, "INVALID_ARGUMENT", 400),
    ("MethodNotFoundError", -32601, "METHOD_NOT_FOUND", 404, "NOT_FOUND", 404),
    ("InvalidParamsError", -32602, "INVALID_PARAMS", 400, "INVALID_ARGUMENT", 400),
    ("InternalError", -32603, "INTERNAL_ERROR", 500, "INTERNAL", 500),
]


@pytest.mark.parametrize("row", MASTER_TABLE, ids=lambda row: row[0])
def test_catalogue_matches_the_master_table(row: tuple[str, int, str, int, str, int]) -> None:
    name, code, reason, http, grpc, legacy_http = row
    kind = next(k for k in A2AErrorKind if k.spec.sdk_name == name)
    spec = kind.spec
    assert (spec.code, spec.reason, spec.http_status, spec.grpc_status,
            spec.spec_1_0_0_http_status) == (code, reason, http, grpc, legacy_http)
    assert A2AErrorKind.from_code(code) is kind


def test_catalogue_has_exactly_the_table_rows() -> None:
    assert len(A2AErrorKind) == len(MASTER_TABLE)


def test_reason_lookup_prefers_invalid_request_over_the_parse_error() -> None:
    assert A2AErrorKind.from_reason("INVALID_REQUEST") is A2AErrorKind.INVALID_REQUEST
    assert A2AErrorKind.from_reason("TASK_NOT_FOUND") is A2AErrorKind.TASK_NOT_FOUND
    assert A2AErrorKind.from_reason("NO_SUCH_REASON") is None
    assert A2AErrorKind.from_code(-1) is None


def test_jsonrpc_task_not_found_is_the_digest_body() -> None:
    expected = json.loads(
        '{"jsonrpc":"2.0","id":1,"error":{"code":-32001,"message":"Task not found",'
        '"data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND",'
        '"domain":"a2a-protocol.org","metadata":{}}]}}')
    assert jsonrpc_error_response(1, A2AError(A2AErrorKind.TASK_NOT_FOUND)) == expected


def test_jsonrpc_validation_failure_is_the_digest_body() -> None:
    expected = json.loads(
        '{"jsonrpc":"2.0","id":1,"error":{"code":-32602,"message":"Validation failed","data":['
        '{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"INVALID_PARAMS",'
        '"domain":"a2a-protocol.org",'
        '"metadata":{"errors":[{"field":"message.message_id","message":"Field is required."}]}},'
        '{"@type":"type.googleapis.com/google.rpc.BadRequest","fieldViolations":'
        '[{"field":"message.message_id","description":"Field is required."}]}]}}')
    error = A2AError(
        A2AErrorKind.INVALID_PARAMS, "Validation failed",
        details={"errors": [{"field": "message.message_id", "message": "Field is required."}]},
        field_violations=[FieldViolation("message.message_id", "Field is required.")])
    assert jsonrpc_error_response(1, error) == expected


def test_jsonrpc_terminal_task_stream_error_is_the_digest_body() -> None:
    expected = json.loads(
        '{"error":{"code":-32004,"message":"Task c1b5 is in terminal state: TASK_STATE_COMPLETED",'
        '"data":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo",'
        '"reason":"UNSUPPORTED_OPERATION","domain":"a2a-protocol.org","metadata":{}}]},'
        '"id":7,"jsonrpc":"2.0"}')
    error = A2AError(A2AErrorKind.UNSUPPORTED_OPERATION,
                     "Task c1b5 is in terminal state: TASK_STATE_COMPLETED")
    assert jsonrpc_error_response(7, error) == expected


@pytest.mark.parametrize("kind", [A2AErrorKind.PARSE_ERROR, A2AErrorKind.METHOD_NOT_FOUND])
def test_parse_error_and_unknown_method_carry_no_data(kind: A2AErrorKind) -> None:
    body = jsonrpc_error_object(A2AError(kind))
    assert body == {"code": kind.spec.code, "message": kind.spec.default_message}


def test_rest_task_not_found_is_the_digest_body() -> None:
    expected = json.loads(
        '{"error":{"code":404,"status":"NOT_FOUND","message":"Task not found",'
        '"details":[{"@type":"type.googleapis.com/google.rpc.ErrorInfo","reason":"TASK_NOT_FOUND",'
        '"domain":"a2a-protocol.org","metadata":{}}]}}')
    error = A2AError(A2AErrorKind.TASK_NOT_FOUND)
    assert rest_error_body(error) == expected
    assert error.http_status == 404


def test_rest_cancel_of_a_terminal_task() -> None:
    error = A2AError(A2AErrorKind.TASK_NOT_CANCELABLE)
    body = rest_error_body(error)["error"]
    assert (error.http_status, body["code"], body["status"], body["message"]) == (
        400, 400, "FAILED_PRECONDITION", "Task cannot be canceled")
    assert body["details"][0]["reason"] == "TASK_NOT_CANCELABLE"


def test_invalid_params_names_the_field_and_the_value() -> None:
    with pytest.raises(ValidationError) as info:
        SendMessageRequest.from_wire({"message": {"role": "ROLE_BOGUS", "parts": [{"text": "x"}]},
                                      "configuration": {"historyLength": -3}})
    error = invalid_params(info.value)
    assert error.kind is A2AErrorKind.INVALID_PARAMS
    assert "message.messageId: Field required" in error.message
    assert "message.role" in error.message and "'ROLE_BOGUS'" in error.message
    assert "configuration.historyLength" in error.message and "-3" in error.message
    fields = [v.field for v in error.field_violations]
    assert fields == ["message.messageId", "message.role", "configuration.historyLength"]
    data = jsonrpc_error_object(error)["data"]
    assert [e["field"] for e in data[0]["metadata"]["errors"]] == fields
    assert [v["field"] for v in data[1]["fieldViolations"]] == fields


def test_invalid_params_paths_index_lists() -> None:
    with pytest.raises(ValidationError) as info:
        SendMessageRequest.from_wire({"message": {"messageId": "m", "role": "ROLE_USER",
                                                  "parts": [{"text": "a"}, {"text": 5}]}})
    error = invalid_params(info.value)
    assert [v.field for v in error.field_violations] == ["message.parts[1].text"]
    assert "(got 5)" in error.message


def test_reading_peer_errors_back() -> None:
    sent = A2AError(A2AErrorKind.TASK_NOT_FOUND, "no task t-9", details={"taskId": "t-9"})
    back = error_from_jsonrpc(jsonrpc_error_object(sent))
    assert (back.kind, back.message, back.details) == (sent.kind, sent.message, sent.details)
    back = error_from_rest(404, rest_error_body(sent))
    assert (back.kind, back.message, back.details) == (sent.kind, sent.message, sent.details)
    unknown = error_from_jsonrpc({"code": -31999, "message": "odd"})
    assert unknown.kind is A2AErrorKind.INTERNAL_ERROR and unknown.details["code"] == -31999
    assert error_from_rest(404, "Not Found").kind is A2AErrorKind.METHOD_NOT_FOUND
    assert error_from_rest(503, None).kind is A2AErrorKind.INTERNAL_ERROR
