"""The core's control-plane routes (``/core/...``) and the control plane itself."""

from __future__ import annotations

from typing import TYPE_CHECKING

from anet_core import hookimpl
from anet_core.records import ControlRoutes, Lifespan

if TYPE_CHECKING:
    from anet_core.node import Node


@hookimpl
def anet_routes(node: Node) -> list[ControlRoutes]:
    # aiohttp loads with the daemon, which calls this hook; a command never does.
    from aiohttp import web

    async def status(request: web.Request) -> web.Response:
        return web.json_response(node.status())

    async def stop(request: web.Request) -> web.Response:
        node.stopping.set()
        return web.json_response({"stopping": True}, status=202)

    return [ControlRoutes(module="core", routes=[web.get("/status", status),
                                                 web.post("/stop", stop)])]


@hookimpl(trylast=True)
def anet_lifespan(node: Node) -> list[Lifespan]:
    from anet_core.control.server import control_plane

    # Last to start, first to close: the CLI sees the node ready only once every module is up.
    return [Lifespan(name="control-plane", open=lambda: control_plane(node), module="core")]
