"""The ``/hub/`` control routes of the node's side of its home hub (anet_core.builtins.join):
the link's status, and joining another hub while the daemon runs."""

from __future__ import annotations

from aiohttp import web
from pydantic import Field

from anet_core.control.parsing import RequestBody, read_body
from anet_core.errors import AnetError
from anet_core.node import NODE_KEY

routes = web.RouteTableDef()


@routes.get("/status")
async def hub_status(request: web.Request) -> web.Response:
    return web.json_response(request.config_dict[NODE_KEY].hub.status.as_dict())


class JoinRequest(RequestBody):
    # An empty URL would leave the hub while config.json still names it: joining needs one.
    url: str = Field(min_length=1, pattern=r"\S")
    instances: list[str] = Field(default_factory=list)
    """The hub's other instances (``hub.instances``)."""


@routes.post("/join")
async def hub_join(request: web.Request) -> web.Response:
    node = request.config_dict[NODE_KEY]
    body = await read_body(request, JoinRequest)
    try:
        status = await node.hub.rejoin(body.url, body.instances)
    except ValueError as error:
        raise AnetError("hub-bad-url", str(error)) from None
    return web.json_response(status.as_dict())
