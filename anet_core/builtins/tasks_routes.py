"""The ``/tasks/`` control routes the task commands call (anet_core.builtins.tasks_cli): the
daemon is reached only through them."""

from __future__ import annotations

from typing import Any

from aiohttp import web
from pydantic import Field

from anet_core.control.parsing import RequestBody, query_number, read_body
from anet_core.node import NODE_KEY
from anet_core.tasks import TaskError, TaskLayer
from anet_core.tasks.common import new_id

routes = web.RouteTableDef()


class SendRequest(RequestBody):
    aid: str
    text: str = Field(min_length=1)
    skill: str | None = None
    context_id: str | None = Field(default=None, alias="contextId")
    """A new task in this context (a conversation with the agent continues)."""
    task_id: str | None = Field(default=None, alias="taskId")
    """The answer to a task of this agent that waits for input."""


class ReplyRequest(RequestBody):
    task_id: str = Field(alias="taskId")
    text: str = Field(min_length=1)
    input_required: bool = Field(default=False, alias="inputRequired")


class TaskIdRequest(RequestBody):
    task_id: str = Field(alias="taskId")


class RejectRequest(RequestBody):
    task_id: str = Field(alias="taskId")
    reason: str | None = None


class PolicyRequest(RequestBody):
    policy: str


class AidRequest(RequestBody):
    aid: str


def _layer(request: web.Request) -> TaskLayer:
    return request.config_dict[NODE_KEY].tasks


@routes.post("/send")
async def send(request: web.Request) -> web.Response:
    body = await read_body(request, SendRequest)
    message: dict[str, Any] = {"messageId": new_id(), "role": "ROLE_USER",
                               "parts": [{"text": body.text}]}
    if body.context_id:
        message["contextId"] = body.context_id
    if body.task_id:
        message["taskId"] = body.task_id
    return web.json_response(await _layer(request).send(body.aid, message, skill=body.skill))


@routes.get("/list")
async def list_tasks(request: web.Request) -> web.Response:
    query = request.query
    page_size = query_number(query, "pageSize", 50)
    layer = _layer(request)
    page = layer.list(query.get("aid"), context_id=query.get("contextId"),
                      state=query.get("status"), page_size=page_size,
                      page_token=query.get("pageToken", ""), include_artifacts=True)
    page["tasks"] = [task | {"peer": layer.peer_of(task["id"])}
                     for task in page["tasks"]]
    return web.json_response(page)


@routes.get("/task/{task_id}")
async def get_task(request: web.Request) -> web.Response:
    """A task this node sent, or else one it received (the operator sees both)."""
    layer, task_id = _layer(request), request.match_info["task_id"]
    try:
        return web.json_response(layer.get(None, task_id) | {
            "role": "requester", "peer": layer.peer_of(task_id)})
    except TaskError:
        received = layer.received(task_id)
        if received is None:
            raise
        return web.json_response(received | {"role": "provider"})


@routes.post("/cancel")
async def cancel(request: web.Request) -> web.Response:
    body = await read_body(request, TaskIdRequest)
    return web.json_response(await _layer(request).cancel(None, body.task_id))


@routes.get("/inbox")
async def inbox(request: web.Request) -> web.Response:
    return web.json_response({"tasks": _layer(request).inbox()})


@routes.post("/reply")
async def reply(request: web.Request) -> web.Response:
    body = await read_body(request, ReplyRequest)
    return web.json_response(await _layer(request).reply(
        body.task_id, body.text, input_required=body.input_required))


@routes.post("/reject")
async def reject(request: web.Request) -> web.Response:
    body = await read_body(request, RejectRequest)
    return web.json_response(await _layer(request).reject(body.task_id, body.reason))


@routes.get("/policy")
async def policy(request: web.Request) -> web.Response:
    return web.json_response({"policy": _layer(request).policy.value})


@routes.post("/policy")
async def set_policy(request: web.Request) -> web.Response:
    body = await read_body(request, PolicyRequest)
    return web.json_response({"policy": _layer(request).set_policy(body.policy).value})


@routes.get("/trust")
async def trusted(request: web.Request) -> web.Response:
    return web.json_response({"trusted": _layer(request).trusted()})


@routes.post("/trust/add")
async def trust(request: web.Request) -> web.Response:
    body = await read_body(request, AidRequest)
    return web.json_response({"aid": body.aid, "changed": _layer(request).trust(body.aid)})


@routes.post("/trust/remove")
async def distrust(request: web.Request) -> web.Response:
    body = await read_body(request, AidRequest)
    return web.json_response({"aid": body.aid, "changed": _layer(request).distrust(body.aid)})
