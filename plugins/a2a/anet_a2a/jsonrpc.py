"""The JSON-RPC binding: ``POST /a2a/v1/agents/{aid}/jsonrpc`` on the local endpoint,
``POST /a2a/{alias}`` on the published surface (both also with a trailing slash).

Every answer is HTTP 200, errors included (except a body that is not a JSON-RPC request, where
the surface says so); a streaming method answers SSE whose events each carry a whole JSON-RPC
response, or a plain JSON-RPC error when it fails before the first event.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from anet_a2a.checks import BODY
from anet_a2a.operations import AgentOperations, EventStream
from anet_a2a.replies import json_reply, jsonrpc_error
from anet_a2a.sse import stream
from anet_a2a.surface import SURFACE
from anet_core.wire import (
    A2AError,
    A2AErrorKind,
    A2AMethod,
    JsonRpcCall,
    JsonRpcRejection,
    jsonrpc_error_response,
    jsonrpc_result_response,
    parse_params,
    parse_request,
)

M = A2AMethod


async def handle(request: web.Request) -> web.StreamResponse:
    surface = request.config_dict[SURFACE]
    call = parse_request(request[BODY])
    if isinstance(call, JsonRpcRejection):
        rejected = call.error.kind in {A2AErrorKind.PARSE_ERROR, A2AErrorKind.INVALID_REQUEST}
        return json_reply(call.response(), status=surface.rejected_status if rejected else 200)
    try:
        operations = await surface.operations(request)
        if call.method in _PUSH:
            raise A2AError(A2AErrorKind.PUSH_NOTIFICATION_NOT_SUPPORTED, surface.push_refusal)
        params = parse_params(call.method, call.params)
        if call.method is M.GET_EXTENDED_AGENT_CARD:
            card = await surface.extended_card(request)
            return json_reply(jsonrpc_result_response(call.id, card))
        if call.method in (M.SEND_STREAMING_MESSAGE, M.SUBSCRIBE_TO_TASK):
            events = await _open_stream(operations, call, params)
        else:
            return json_reply(jsonrpc_result_response(call.id, await _unary(operations, call,
                                                                          params)))
    except A2AError as error:
        return jsonrpc_error(call.id, error)
    return await stream(request, events,
                        frame=lambda event: jsonrpc_result_response(call.id, event),
                        error_frame=lambda error: jsonrpc_error_response(call.id, error))


_PUSH = frozenset({M.CREATE_TASK_PUSH_NOTIFICATION_CONFIG, M.GET_TASK_PUSH_NOTIFICATION_CONFIG,
                   M.LIST_TASK_PUSH_NOTIFICATION_CONFIGS, M.DELETE_TASK_PUSH_NOTIFICATION_CONFIG})


async def _unary(operations: AgentOperations, call: JsonRpcCall, params: Any) -> Any:
    if call.method is M.SEND_MESSAGE:
        return await operations.send_message(params)
    if call.method is M.GET_TASK:
        return operations.get_task(params)
    if call.method is M.LIST_TASKS:
        return operations.list_tasks(params)
    if call.method is M.CANCEL_TASK:
        return await operations.cancel_task(params)
    raise AssertionError(f"{call.method} has no unary handler")


async def _open_stream(operations: AgentOperations, call: JsonRpcCall,
                       params: Any) -> EventStream:
    if call.method is M.SEND_STREAMING_MESSAGE:
        return await operations.send_streaming_message(params)
    return operations.subscribe_to_task(params)
