"""``GET /metrics/`` on the control plane: the node's Prometheus metrics (anet_core.metrics).

Behind the control token like every control route: Prometheus sends it as a bearer token
(``authorization: {credentials_file: <data dir>/control_token.txt}``), see docs/operations.md.
"""

from __future__ import annotations

from aiohttp import web

from anet_core import hookimpl
from anet_core.metrics import CONTENT_TYPE
from anet_core.node import NODE_KEY, Node
from anet_core.records import ControlRoutes

routes = web.RouteTableDef()


@routes.get("/")
async def metrics(request: web.Request) -> web.Response:
    node = request.config_dict[NODE_KEY]
    return web.Response(body=node.metrics.exposition(), headers={"Content-Type": CONTENT_TYPE})


@hookimpl
def anet_routes(node: Node) -> list[ControlRoutes]:
    return [ControlRoutes(module="metrics", routes=list(routes))]
