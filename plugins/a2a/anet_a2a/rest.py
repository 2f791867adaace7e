"""The HTTP+JSON binding below ``/a2a/v1/agents/{aid}/rest`` (local endpoint) and
``/a2a/{alias}/rest`` (published surface): the HTTP+JSON binding of
https://a2a-protocol.org/latest/specification/; docs/a2a.md, "Routes".

Bodies and results are bare ProtoJSON; errors are google.rpc.Status with their HTTP status.
The ``:cancel`` and ``:subscribe`` routes come before ``tasks/{id}``, whose id excludes ``:``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from anet_a2a.checks import BODY
from anet_a2a.operations import AgentOperations, EventStream
from anet_a2a.replies import rest_error, rest_result
from anet_a2a.sse import stream
from anet_a2a.surface import SURFACE
from anet_core.wire import (
    A2AError,
    A2AErrorKind,
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    SendMessageRequest,
    SubscribeToTaskRequest,
    UnencodableText,
    WireModel,
    parse_json,
    rest_error_body,
    validate_params,
)

Operation = Callable[[web.Request, AgentOperations], Awaitable[web.StreamResponse]]


def _body(request: web.Request) -> dict[str, Any]:
    raw = request[BODY]
    if not raw.strip():
        return {}  # cancel and subscribe may come without a body
    try:
        document = parse_json(raw)
    except UnencodableText as error:
        raise A2AError(A2AErrorKind.INVALID_PARAMS, f"Invalid params: {error}") from None
    except ValueError as error:
        raise A2AError(A2AErrorKind.PARSE_ERROR, f"Failed to load JSON: {error}") from None
    if not isinstance(document, dict):
        raise A2AError(A2AErrorKind.INVALID_REQUEST,
                       f"The body must be a JSON object, got {type(document).__name__}")
    return document


def _query(request: web.Request) -> dict[str, Any]:
    return {key: request.query.get(key) for key in request.query}


async def _send(request: web.Request, ops: AgentOperations) -> web.StreamResponse:
    return rest_result(await ops.send_message(validate_params(SendMessageRequest,
                                                              _body(request))))


async def _stream_send(request: web.Request, ops: AgentOperations) -> web.StreamResponse:
    params = validate_params(SendMessageRequest, _body(request))
    return await _stream(request, await ops.send_streaming_message(params))


async def _get(request: web.Request, ops: AgentOperations) -> web.StreamResponse:
    params = {**_query(request), "id": request.match_info["id"]}
    return rest_result(ops.get_task(validate_params(GetTaskRequest, params)))


async def _list(request: web.Request, ops: AgentOperations) -> web.StreamResponse:
    return rest_result(ops.list_tasks(validate_params(ListTasksRequest, _query(request))))


async def _cancel(request: web.Request, ops: AgentOperations) -> web.StreamResponse:
    params = {**_body(request), "id": request.match_info["id"]}  # the path's id wins
    return rest_result(await ops.cancel_task(validate_params(CancelTaskRequest, params)))


async def _subscribe(request: web.Request, ops: AgentOperations) -> web.StreamResponse:
    params = {**_body(request), "id": request.match_info["id"]}
    return await _stream(request, ops.subscribe_to_task(
        validate_params(SubscribeToTaskRequest, params)))


async def _push(request: web.Request, ops: AgentOperations) -> web.StreamResponse:
    raise A2AError(A2AErrorKind.PUSH_NOTIFICATION_NOT_SUPPORTED,
                   request.config_dict[SURFACE].push_refusal)


async def _stream(request: web.Request, events: EventStream) -> web.StreamResponse:
    return await stream(request, events, frame=WireModel.wire,
                        error_frame=lambda error: rest_error_body(error))


def _operation(operation: Operation) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handler(request: web.Request) -> web.StreamResponse:
        try:
            operations = await request.config_dict[SURFACE].operations(request)
            return await operation(request, operations)
        except A2AError as error:
            return rest_error(error)

    return handler


async def _extended_card(request: web.Request) -> web.StreamResponse:
    try:
        card = await request.config_dict[SURFACE].extended_card(request)
    except A2AError as error:
        return rest_error(error)
    return rest_result(card)


async def _unknown(request: web.Request) -> web.StreamResponse:
    return rest_error(A2AError(A2AErrorKind.METHOD_NOT_FOUND,
                               f"No HTTP+JSON operation is {request.method} "
                               f"{request.match_info['tail'][:80]!r}"))


def routes(prefix: str) -> list[web.RouteDef]:
    """The binding's routes below ``prefix`` (``.../{aid}/rest``), most specific first."""
    tasks = f"{prefix}/tasks"
    push = f"{tasks}/{{id}}/pushNotificationConfigs"
    return [
        web.post(f"{prefix}/message:send", _operation(_send)),
        web.post(f"{prefix}/message:stream", _operation(_stream_send)),
        web.post(f"{tasks}/{{id}}:cancel", _operation(_cancel)),
        web.post(f"{tasks}/{{id}}:subscribe", _operation(_subscribe)),
        web.get(f"{tasks}/{{id}}:subscribe", _operation(_subscribe), allow_head=False),
        web.post(push, _operation(_push)),
        web.get(push, _operation(_push), allow_head=False),
        web.get(f"{push}/{{config}}", _operation(_push), allow_head=False),
        web.delete(f"{push}/{{config}}", _operation(_push)),
        web.get(f"{tasks}/{{id:[^/:]+}}", _operation(_get), allow_head=False),
        web.get(tasks, _operation(_list), allow_head=False),
        web.get(f"{prefix}/extendedAgentCard", _extended_card, allow_head=False),
        web.route("*", f"{prefix}/{{tail:.*}}", _unknown),
    ]
