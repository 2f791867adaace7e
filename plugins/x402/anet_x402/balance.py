"""This node's credit at its home hub's rail: ``GET /x402/balance`` on the control plane (what
``anet balance`` shows, anet_x402.balance_cli; docs/payments.md). The doctor check
``x402-credit`` is in anet_x402.payer_checks."""

from __future__ import annotations

from aiohttp import web

from anet_core.api import NODE_KEY, Node
from anet_x402.rail import Balances, home_balance

routes = web.RouteTableDef()


def as_dict(found: Balances) -> dict[str, object]:
    return {"aid": found.aid, "hub": found.hub, "railUrl": found.url, "balances": found.balances}


@routes.get("/balance")
async def balance(request: web.Request) -> web.Response:
    node: Node = request.config_dict[NODE_KEY]
    found = await home_balance(node.identity, node.hub.status.hub_url or node.config.hub.url)
    return web.json_response(as_dict(found))
