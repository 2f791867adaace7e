"""The core's control-plane routes (``/core/...``) and the control plane itself."""

from __future__ import annotations

from aiohttp import web

from anet_core import hookimpl
from anet_core.control.server import control_plane
from anet_core.node import NODE_KEY, Node
from anet_core.records import ControlRoutes, Lifespan

routes = web.RouteTableDef()


@routes.get("/status")
async def status(request: web.Request) -> web.Response:
    return web.json_response(request.config_dict[NODE_KEY].status())


@routes.post("/stop")
async def stop(request: web.Request) -> web.Response:
    request.config_dict[NODE_KEY].stopping.set()
    return web.json_response({"stopping": True}, status=202)


@hookimpl
def anet_routes(node: Node) -> list[ControlRoutes]:
    return [ControlRoutes(module="core", routes=list(routes))]


@hookimpl(trylast=True)
def anet_lifespan(node: Node) -> list[Lifespan]:
    # Last to start, first to close: the CLI sees the node ready only once every module is up.
    return [Lifespan(name="control-plane", open=lambda: control_plane(node), module="core")]
