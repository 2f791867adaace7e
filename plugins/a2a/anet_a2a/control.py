"""``GET /a2a/endpoint`` on the control plane: where the local A2A endpoint listens, for the
demo and other local tools, so none of them reads this module's files.

The answer names the token's file, never the token: a control-plane answer may end up in a log.
"""

from __future__ import annotations

from aiohttp import web

from anet_a2a import AGENTS_PATH
from anet_a2a.doctor import REMEDY
from anet_a2a.state import MODULE, StateDir
from anet_core.api import NODE_KEY, AnetError, ControlRoutes, Node

routes = web.RouteTableDef()


@routes.get("/endpoint")
async def endpoint(request: web.Request) -> web.Response:
    node: Node = request.config_dict[NODE_KEY]
    listener = node.listeners.get(MODULE)
    if listener is None:
        raise AnetError("a2a-not-started", "the local A2A interface did not start",
                        hint="the daemon log says why")
    if listener.state != "up":
        raise AnetError("a2a-down", f"the local A2A interface is down: {listener.detail}",
                        hint=REMEDY)
    return web.json_response({"url": f"http://{listener.address}", "agentsPath": AGENTS_PATH,
                              "tokenFile": str(StateDir.of(node.paths).token_file)})


def control_routes() -> ControlRoutes:
    return ControlRoutes(module=MODULE, routes=[*routes])
