"""Control-plane routes of the task layer (``/tasks/...``): what the task commands call."""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from anet_core import hookimpl
from anet_core.errors import AnetError
from anet_core.link.contract import HubError, PeerInfo, SearchQuery, Verification
from anet_core.node import NODE_KEY, Node
from anet_core.records import ControlRoutes
from anet_core.tasks import TaskError, TaskLayer
from anet_core.tasks.common import new_id

log = logging.getLogger("anet.tasks.routes")

routes = web.RouteTableDef()
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]

ERROR_STATUS = {"task-not-found": 404, "not-registered": 409, "hub-unavailable": 502,
                "unknown-agent": 404}


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class SendRequest(_Request):
    aid: str
    text: str = Field(min_length=1)
    skill: str | None = None


class ReplyRequest(_Request):
    task_id: str = Field(alias="taskId")
    text: str = Field(min_length=1)
    input_required: bool = Field(default=False, alias="inputRequired")


class TaskIdRequest(_Request):
    task_id: str = Field(alias="taskId")


class RejectRequest(_Request):
    task_id: str = Field(alias="taskId")
    reason: str | None = None


class ReviewRequest(_Request):
    task_id: str = Field(alias="taskId")
    rating: int = Field(ge=1, le=5)
    text: str = Field(default="", max_length=2000)


class PolicyRequest(_Request):
    policy: str


class AidRequest(_Request):
    aid: str


class RotateRequest(_Request):
    emergency: bool = False


def _layer(request: web.Request) -> TaskLayer:
    return request.config_dict[NODE_KEY].tasks


def _error(error: AnetError) -> web.Response:
    return web.json_response(error.as_dict(), status=ERROR_STATUS.get(error.reference, 400))


async def _body(request: web.Request, model: type[_Request]) -> Any:
    try:
        return model.model_validate(await request.json())
    except (ValueError, ValidationError) as error:
        raise AnetError("bad-request",
                        f"{request.path}: the request body is invalid: {error}") from None


def _route(method: str, path: str) -> Callable[[Handler], Handler]:
    """Register a handler whose refusals become one JSON error (the CLI prints it as one line
    and a hint); control-plane sub-apps have no middleware of their own, hence the wrapper."""
    def register(handler: Handler) -> Handler:
        @functools.wraps(handler)
        async def guarded(request: web.Request) -> web.StreamResponse:
            try:
                return await handler(request)
            except AnetError as error:
                return _error(error)
            except HubError as error:
                return _error(AnetError("hub-unavailable", error.message,
                                        hint="`anet status` shows the hub connection"))

        routes.route(method, path)(guarded)
        return handler

    return register


@_route("POST", "/send")
async def send(request: web.Request) -> web.Response:
    body = await _body(request, SendRequest)
    message = {"messageId": new_id(), "role": "ROLE_USER", "parts": [{"text": body.text}]}
    return web.json_response(await _layer(request).send(body.aid, message, skill=body.skill))


def _number(query: Mapping[str, str], name: str, default: int) -> int:
    try:
        return int(query.get(name, default))
    except ValueError:
        raise TaskError("invalid-params", f"{name} {query[name]!r} is not a number") from None


@_route("GET", "/list")
async def list_tasks(request: web.Request) -> web.Response:
    query = request.query
    page_size = _number(query, "pageSize", 50)
    layer = _layer(request)
    page = layer.list(query.get("aid"), context_id=query.get("contextId"),
                      state=query.get("status"), page_size=page_size,
                      page_token=query.get("pageToken", ""), include_artifacts=True)
    page["tasks"] = [task | {"peer": layer.requester.peer_of(task["id"])}
                     for task in page["tasks"]]
    return web.json_response(page)


@_route("GET", "/task/{task_id}")
async def get_task(request: web.Request) -> web.Response:
    """A task this node sent, or else one it received (the operator sees both)."""
    layer, task_id = _layer(request), request.match_info["task_id"]
    try:
        return web.json_response(layer.get(None, task_id) | {
            "role": "requester", "peer": layer.requester.peer_of(task_id)})
    except TaskError:
        received = layer.provider.received(task_id)
        if received is None:
            raise
        return web.json_response(received | {"role": "provider"})


@_route("POST", "/cancel")
async def cancel(request: web.Request) -> web.Response:
    body = await _body(request, TaskIdRequest)
    return web.json_response(await _layer(request).cancel(None, body.task_id))


@_route("GET", "/inbox")
async def inbox(request: web.Request) -> web.Response:
    return web.json_response({"tasks": _layer(request).provider.inbox()})


@_route("POST", "/reply")
async def reply(request: web.Request) -> web.Response:
    body = await _body(request, ReplyRequest)
    return web.json_response(await _layer(request).provider.reply(
        body.task_id, body.text, input_required=body.input_required))


@_route("POST", "/reject")
async def reject(request: web.Request) -> web.Response:
    body = await _body(request, RejectRequest)
    return web.json_response(await _layer(request).provider.reject(body.task_id, body.reason))


@_route("POST", "/review")
async def review(request: web.Request) -> web.Response:
    body = await _body(request, ReviewRequest)
    return web.json_response(await _layer(request).requester.review(body.task_id, body.rating,
                                                                      body.text))


@_route("GET", "/policy")
async def policy(request: web.Request) -> web.Response:
    return web.json_response({"policy": _layer(request).policy.value})


@_route("POST", "/policy")
async def set_policy(request: web.Request) -> web.Response:
    body = await _body(request, PolicyRequest)
    return web.json_response({"policy": _layer(request).set_policy(body.policy).value})


@_route("GET", "/trust")
async def trusted(request: web.Request) -> web.Response:
    return web.json_response({"trusted": _layer(request).trusted()})


@_route("POST", "/trust/add")
async def trust(request: web.Request) -> web.Response:
    body = await _body(request, AidRequest)
    return web.json_response({"aid": body.aid, "changed": _layer(request).trust(body.aid)})


@_route("POST", "/trust/remove")
async def distrust(request: web.Request) -> web.Response:
    body = await _body(request, AidRequest)
    return web.json_response({"aid": body.aid, "changed": _layer(request).distrust(body.aid)})


@_route("GET", "/agents")
async def agents(request: web.Request) -> web.Response:
    query = request.query
    limit = _number(query, "limit", 50)
    node = request.config_dict[NODE_KEY]
    page = await node.hub.search(SearchQuery(
        skill=query.get("skill"), tag=query.get("tag"), q=query.get("q"),
        cursor=query.get("cursor"), limit=limit))
    # The node is not a remote agent of itself, as on the local A2A endpoint.
    remote = [peer for peer in page.peers if peer.aid != node.aid]
    return web.json_response({"agents": [verified_fields(peer) for peer in remote],
                              "nextCursor": page.next_cursor})


@_route("POST", "/keys/rotate")
async def rotate(request: web.Request) -> web.Response:
    body = await _body(request, RotateRequest)
    node: Node = request.config_dict[NODE_KEY]
    history = await asyncio.to_thread(node.identity.rotate, body.emergency)
    # The hub takes a new key history at registration; the card follows, signed anew.
    await node.hub.reregister()
    return web.json_response({"aid": node.aid, "keySeq": history.key_seq,
                              "emergency": body.emergency})


def verified_fields(peer: PeerInfo) -> dict[str, Any]:
    """What ``anet agents`` may show: the agent's own words only when its card verified."""
    entry: dict[str, Any] = {"aid": peer.aid, "verification": peer.verification.value,
                             "keyState": peer.key_state.value, "official": peer.official}
    if peer.verification is Verification.VERIFIED and peer.card is not None:
        card = peer.card
        entry |= {"name": card.get("name", ""), "description": card.get("description", ""),
                  "skills": card.get("skills", []), "charge": card.get("charge", "free"),
                  "homeHub": peer.home_hub, "lastSeen": peer.last_seen,
                  "reviewCount": peer.review_count, "avgRating": peer.avg_rating}
    return entry


@hookimpl
def anet_routes(node: Node) -> list[ControlRoutes]:
    return [ControlRoutes(module="tasks", routes=[*routes])]
