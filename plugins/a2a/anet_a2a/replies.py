"""How answers and errors look on each binding (https://a2a-protocol.org/latest/specification/;
docs/a2a.md, "Errors").

JSON-RPC: HTTP 200 and a JSON-RPC body, errors included. HTTP+JSON (and the card and list
routes): the result at 200, an error as google.rpc.Status with its HTTP status.
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import Enum
from typing import Any

from aiohttp import web

from anet_core.wire import (
    A2AError,
    A2AErrorKind,
    JsonRpcId,
    WireModel,
    compact_json,
    jsonrpc_error_response,
    rest_error_body,
)

JSON = "application/json"
# ContentTypeNotSupported: the TCK (spec 1.0.0) expects 415 on HTTP+JSON, and 415 is what the
# status means to any HTTP client; every other error keeps the current spec's status.
_REST_STATUS = {A2AErrorKind.CONTENT_TYPE_NOT_SUPPORTED: 415}


class Binding(Enum):
    JSONRPC = "jsonrpc"
    REST = "rest"


def json_reply(body: Any, status: int = 200, headers: Mapping[str, str] | None = None
               ) -> web.Response:
    return web.Response(text=compact_json(body), status=status, content_type=JSON,
                        headers=headers)


def jsonrpc_error(request_id: JsonRpcId, error: A2AError) -> web.Response:
    return json_reply(jsonrpc_error_response(request_id, error))


def rest_error(error: A2AError, status: int | None = None) -> web.Response:
    status = status or _REST_STATUS.get(error.kind, error.http_status)
    body = rest_error_body(error)
    body["error"]["code"] = status
    return json_reply(body, status=status)


def error_reply(binding: Binding, error: A2AError, request_id: JsonRpcId = None,
                status: int | None = None) -> web.Response:
    """``error`` on ``binding``; ``status`` forces an HTTP status (413, 408) on either binding."""
    if binding is Binding.JSONRPC:
        reply = jsonrpc_error(request_id, error)
        if status is not None:
            reply.set_status(status)
        return reply
    return rest_error(error, status)


def rest_result(result: WireModel | Mapping[str, Any]) -> web.Response:
    return json_reply(result.wire() if isinstance(result, WireModel) else dict(result))


def no_such_agent(aid: str) -> A2AError:
    shown = aid if len(aid) <= 80 else aid[:80] + "..."
    return A2AError(A2AErrorKind.METHOD_NOT_FOUND,
                    f"No such agent: {shown!r} (agents are listed at /a2a/v1/agents)")
