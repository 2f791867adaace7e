"""Errors and JSON-RPC envelope handling against the official SDK's own server code."""

from __future__ import annotations

import json
import warnings
from typing import Any

import pytest

pytest.importorskip("a2a")
pytest.importorskip("starlette")

from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.request_handlers.response_helpers import build_error_response
from a2a.server.routes import create_jsonrpc_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import AgentCapabilities, AgentCard, AgentInterface, AgentSkill
from a2a.utils import errors as sdk_errors
from a2a.utils.error_handlers import build_rest_error_payload
from starlette.applications import Starlette

from anet_core.wire import (
    A2AError,
    A2AErrorKind,
    FieldViolation,
    JsonRpcCall,
    jsonrpc_error_response,
    parse_request,
    rest_error_body,
)

with warnings.catch_warnings():
    # Starlette 1.x nags about httpx in its test client; the oracle runs in-process all the same.
    warnings.filterwarnings("ignore", message=".*httpx.*")
    from starlette.testclient import TestClient

SDK_KINDS = [kind for kind in A2AErrorKind if kind is not A2AErrorKind.PARSE_ERROR]


def sdk_class(kind: A2AErrorKind) -> type[sdk_errors.A2AError]:
    return getattr(sdk_errors, kind.spec.sdk_name)  # type: ignore[no-any-return]


@pytest.mark.parametrize("kind", list(A2AErrorKind), ids=lambda k: k.name)
def test_catalogue_matches_the_sdk_tables(kind: A2AErrorKind) -> None:
    cls = sdk_class(kind)
    assert sdk_errors.JSON_RPC_ERROR_CODE_MAP[cls] == kind.spec.code
    assert cls.message == kind.spec.default_message
    if kind is not A2AErrorKind.PARSE_ERROR:  # the SDK maps JSON parse errors outside the table
        mapping = sdk_errors.A2A_ERROR_MAPPING[cls]
        assert (mapping.http_code, mapping.grpc_status, mapping.reason) == (
            kind.spec.http_status, kind.spec.grpc_status, kind.spec.reason)


@pytest.mark.parametrize("kind", SDK_KINDS, ids=lambda k: k.name)
def test_renderings_equal_the_sdk_builders(kind: A2AErrorKind) -> None:
    details = {"taskId": "t-1", "count": 3}
    theirs = sdk_class(kind)("something specific", data=details)
    ours = A2AError(kind, "something specific", details=details)
    assert rest_error_body(ours) == build_rest_error_payload(theirs)
    if kind.spec.jsonrpc_data:  # the others are checked against the dispatcher below
        assert jsonrpc_error_response(9, ours) == build_error_response(9, theirs)


def test_validation_error_rendering_equals_the_sdk() -> None:
    errors = [{"field": "message.messageId", "message": "Field required"},
              {"field": "configuration.historyLength", "message": "must be >= 0"}]
    theirs = sdk_errors.InvalidParamsError("Validation failed", data={"errors": errors})
    ours = A2AError(A2AErrorKind.INVALID_PARAMS, "Validation failed", details={"errors": errors},
                    field_violations=[FieldViolation(e["field"], e["message"]) for e in errors])
    assert jsonrpc_error_response("r", ours) == build_error_response("r", theirs)
    assert rest_error_body(ours) == build_rest_error_payload(theirs)


class _NeverCalled(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise AssertionError("only malformed requests are sent")

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        raise AssertionError("only malformed requests are sent")


@pytest.fixture(scope="module")
def sdk_server() -> TestClient:
    card = AgentCard(
        name="oracle", description="SDK server used as an oracle", version="1",
        supported_interfaces=[AgentInterface(url="http://testserver/rpc",
                                             protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=True), default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[AgentSkill(id="s", name="s", description="s", tags=["s"])])
    handler = DefaultRequestHandler(agent_executor=_NeverCalled(), task_store=InMemoryTaskStore(),
                                    agent_card=card)
    app = Starlette(routes=[*create_jsonrpc_routes(request_handler=handler, rpc_url="/rpc")])
    return TestClient(app)


MALFORMED = [
    b"{bad",
    b'{"jsonrpc": "2.0", "id": 1,',
    b"[1]",
    b'[{"jsonrpc":"2.0","id":1,"method":"GetTask"}]',
    b"5",
    b'{"jsonrpc":"1.0","id":1,"method":"GetTask"}',
    b'{"jsonrpc":"2.0","id":true,"method":"GetTask"}',
    b'{"jsonrpc":"2.0","id":1.5,"method":"GetTask"}',
    b'{"jsonrpc":"2.0","id":1}',
    b'{"jsonrpc":"2.0","id":"x","method":""}',
    b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":"x"}',
    b'{"jsonrpc":"2.0","id":1,"method":"GetTask","params":[1]}',
    b'{"jsonrpc":"2.0","id":1,"method":"message/send","params":{}}',
    b'{"jsonrpc":"2.0","id":"q","method":"Nope"}',
]


@pytest.mark.parametrize("body", MALFORMED, ids=lambda b: b.decode(errors="replace")[:40])
def test_envelope_errors_match_the_sdk_server(sdk_server: TestClient, body: bytes) -> None:
    theirs = sdk_server.post("/rpc", content=body, headers={"A2A-Version": "1.0"})
    assert theirs.status_code == 200
    their_body: dict[str, Any] = theirs.json()
    outcome = parse_request(body)
    assert not isinstance(outcome, JsonRpcCall)
    ours = json.loads(json.dumps(outcome.response()))
    assert ours["id"] == their_body["id"]
    assert ours["error"]["code"] == their_body["error"]["code"]
    assert ("data" in ours["error"]) == ("data" in their_body["error"])
    if "data" in ours["error"]:
        assert ours["error"]["data"][0]["reason"] == their_body["error"]["data"][0]["reason"]
