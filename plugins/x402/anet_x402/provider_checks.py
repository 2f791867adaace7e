"""``anet doctor``'s check ``x402-prices``: the prices are valid (config.json's model refuses
what is not) and each priced skill has a rail this node can reach now (the rail's
``/x402/supported`` names its network and keeps the price's asset)."""

from __future__ import annotations

from anet_core.api import CheckContext, CheckResult, CheckStatus
from anet_x402.config import HOME_RAIL, X402Config
from anet_x402.prices import Rail, home_rail, reachable_rails
from anet_x402.rail import RailClient, RailError

MODULE = "x402"
SUPPORTED_TIMEOUT_S = 5.0


async def supported_assets(rail: Rail) -> set[str] | str:
    """The assets the rail keeps on its network, or why it could not be asked."""
    try:
        async with RailClient(rail.http_url, timeout_s=SUPPORTED_TIMEOUT_S) as client:
            supported = await client.supported()
    except RailError as error:
        return error.message
    assets: set[str] = set()
    for kind in supported.kinds:
        if kind.network == rail.network:
            assets |= set((kind.extra or {}).get("assets", {}))
    return assets


async def prices_reachable(ctx: CheckContext) -> CheckResult:
    config = ctx.config.module(MODULE, X402Config)
    prices = config.prices
    if not prices:
        return CheckResult(CheckStatus.OK, "no skill is priced: this node charges nothing")
    home = home_rail(ctx.paths)
    problems: list[str] = []
    asked: dict[Rail, set[str] | str] = {}
    for skill, price in sorted(prices.items()):
        rails = reachable_rails(price, home, config.rail_urls)
        if not rails:
            named = ", ".join(price.rails)
            problems.append(f"{skill}: no rail this node can reach among {named}"
                            + (" (not registered at a hub yet)" if home is None
                               and HOME_RAIL in price.rails else ""))
            continue
        for rail in rails:
            if rail not in asked:
                asked[rail] = await supported_assets(rail)
            assets = asked[rail]
            if isinstance(assets, str):
                problems.append(f"{skill}: {assets}")
            elif price.asset not in assets:
                problems.append(f"{skill}: the rail {rail.network} keeps no {price.asset} "
                                f"(it keeps {', '.join(sorted(assets)) or 'nothing'})")
    listed = ", ".join(f"{skill} {price.amount} {price.asset}"
                       for skill, price in sorted(prices.items()))
    if problems:
        return CheckResult(CheckStatus.FAIL, f"priced skills without a reachable rail: "
                                             f"{len(problems)}", detail="\n".join(problems),
                           hint="join the hub the prices name (`anet join <url>`), or set "
                                'modules.x402.prices.<skill>.rails to ["home"]')
    return CheckResult(CheckStatus.OK, f"prices: {listed}; every rail answers")
