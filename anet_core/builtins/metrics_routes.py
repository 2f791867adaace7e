"""``GET /metrics/`` on the control plane: the node's Prometheus metrics (anet_core.metrics).

Behind the control token like every control route: Prometheus sends it as a bearer token
(``authorization: {credentials_file: <data dir>/control_token.txt}``), see docs/operations.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from anet_core import hookimpl
from anet_core.records import ControlRoutes

if TYPE_CHECKING:
    from anet_core.node import Node


@hookimpl
def anet_routes(node: Node) -> list[ControlRoutes]:
    # aiohttp loads with the daemon, which calls this hook; a command never does.
    from aiohttp import web

    async def metrics(request: web.Request) -> web.Response:
        return web.Response(body=node.metrics.exposition(),
                            headers={"Content-Type": node.metrics.meters.content_type()})

    return [ControlRoutes(module="metrics", routes=[web.get("/", metrics)])]
