"""This node's credit at its home hub's rail: ``GET /x402/balance`` on the control plane (what
``anet balance`` shows, anet_x402.balance_cli) and the doctor check ``x402-credit``
(docs/payments.md)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from anet_core.api import (
    NODE_KEY,
    AnetError,
    CheckContext,
    CheckResult,
    CheckStatus,
    Identity,
    Node,
)
from anet_x402.balance_cli import CREDIT_HINT, MODULE
from anet_x402.config import X402Config
from anet_x402.rail import Balances, RailClient, RailError

NOT_JOINED_HINT = "join a hub first: `anet join <hub URL>`"

routes = web.RouteTableDef()


async def home_balance(identity: Identity, hub_url: str | None) -> Balances:
    """``identity``'s credit at the rail of the hub at ``hub_url``; :class:`AnetError` when there
    is no hub or its rail cannot tell."""
    if not hub_url:
        raise AnetError("x402-not-joined", "this node has no home hub, so no rail holds its "
                                           "credit", hint=NOT_JOINED_HINT)
    try:
        async with RailClient(hub_url) as rail:
            return await rail.balance(identity)
    except RailError as error:
        hint = (f"the node registers at its hub when it runs (`anet up`); {CREDIT_HINT}"
                .format(aid=identity.aid) if error.reason == "unknown-agent"
                else "`anet status` shows the hub connection")
        raise AnetError(error.reason, error.message, hint=hint) from None


def as_dict(found: Balances) -> dict[str, object]:
    return {"aid": found.aid, "hub": found.hub, "railUrl": found.url, "balances": found.balances}


@routes.get("/balance")
async def balance(request: web.Request) -> web.Response:
    node: Node = request.config_dict[NODE_KEY]
    found = await home_balance(node.identity, node.hub.status.hub_url or node.config.hub.url)
    return web.json_response(as_dict(found))


async def credit_check(ctx: CheckContext) -> CheckResult:
    """Credit at the home rail, for each asset the node's tiers let it pay by itself."""
    config = ctx.config.module(MODULE, X402Config)
    payable = sorted({*config.auto_max, *config.agent_max})
    if not ctx.paths.identity.exists():
        return CheckResult(CheckStatus.SKIP, "no identity yet", hint="`anet init` makes one")
    identity = await asyncio.to_thread(Identity.load, ctx.paths.identity)
    try:
        found = await home_balance(identity, ctx.config.hub.url)
    except AnetError as error:
        if error.reason == "x402-not-joined":
            return CheckResult(CheckStatus.SKIP, error.message, hint=error.hint)
        return CheckResult(CheckStatus.WARN if not payable else CheckStatus.FAIL,
                           "the home rail cannot tell this node's credit", detail=error.message,
                           hint=error.hint)
    held = ", ".join(f"{amount} {asset}" for asset, amount in sorted(found.balances.items()))
    missing = [asset for asset in payable if asset not in found.balances]
    if missing:
        return CheckResult(CheckStatus.WARN,
                           f"no {', '.join(missing)} credit at the home rail, and modules.x402 "
                           f"lets this node pay in it", detail=held or "no credit at all",
                           hint=CREDIT_HINT.format(aid=identity.aid))
    if not found.balances:
        return CheckResult(CheckStatus.OK, "no credit at the home rail; this node pays nothing "
                                           "by itself (modules.x402 has no tiers)")
    return CheckResult(CheckStatus.OK, f"credit at the home rail: {held}", detail=found.url)
