"""``anet doctor``'s checks of the paying side: ``x402-tiers`` (the spending tiers, and today's
spend against ``agent_daily_max``), ``x402-credit`` (credit at the home hub's rail) and
``x402-reconcile`` (the evidence chain against the hub's ledger, through the running daemon).
They load the payer's book and the rail client, none of the node's code."""

from __future__ import annotations

import asyncio

from anet_core.api import (
    AnetError,
    CheckContext,
    CheckResult,
    CheckStatus,
    ControlClient,
    Identity,
)
from anet_core.protocol.amounts import format_amount
from anet_x402.balance_cli import CREDIT_HINT, MODULE
from anet_x402.config import X402Config
from anet_x402.rail import home_balance
from anet_x402.spend import PayerBook
from anet_x402.tiers import Limits


async def tiers_state(ctx: CheckContext) -> CheckResult:
    config = ctx.config.module(MODULE, X402Config)
    limits = Limits(config)
    if not limits.configured and config.prices:
        return CheckResult(CheckStatus.OK, "no spending tier: this node charges for its skills "
                                           "and pays nothing by itself (a quote it receives "
                                           "waits for `anet pay`)")
    if not limits.configured:
        return CheckResult(CheckStatus.WARN, "no spending tier is configured: every quote waits "
                                             "for `anet pay`",
                           hint="set modules.x402.auto_max and agent_max (docs/payments.md)")
    book = PayerBook.of(ctx.paths)
    try:
        assets = sorted(set(config.auto_max) | set(config.agent_max)
                        | set(config.agent_daily_max))
        spent = {asset: book.spent(asset) for asset in assets}
    finally:
        book.close()
    parts, over = [], []
    for asset in assets:
        daily = config.limit(config.agent_daily_max, asset)
        parts.append(f"{asset}: auto {config.auto_max.get(asset, '0')}, agent "
                     f"{config.agent_max.get(asset, '0')}, today "
                     f"{format_amount(spent[asset], asset)} of "
                     f"{config.agent_daily_max.get(asset, '0')}")
        if daily and spent[asset] >= daily:
            over.append(asset)
    summary = "; ".join(parts)
    if over:
        return CheckResult(CheckStatus.WARN, summary,
                           hint=f"agent_daily_max is reached for {', '.join(over)}: the agent's "
                                "payments wait for `anet pay` until the next UTC day")
    return CheckResult(CheckStatus.OK, summary)


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


RECONCILE_TIMEOUT_S = 15.0
"""How long ``x402-reconcile`` waits for the daemon's comparison (the check's limit is 20 s)."""


async def reconcile_check(ctx: CheckContext) -> CheckResult:
    """``anet balance --reconcile`` within the check's time limit, through the running daemon
    (which holds the chain and reaches the hub)."""
    try:
        await ctx.daemon_status()  # asked once for all checks: a hung daemon ends this one here
        daemon = ControlClient(ctx.paths, timeout=RECONCILE_TIMEOUT_S)
        found = await asyncio.to_thread(daemon.get, f"/{MODULE}/reconcile")
    except AnetError as error:
        if error.reason in {"daemon-not-running", "x402-not-joined"}:
            return CheckResult(CheckStatus.SKIP, error.message, hint=error.hint)
        return CheckResult(CheckStatus.WARN, "the hub's ledger cannot be compared with the "
                                             "chain now", detail=error.message, hint=error.hint)
    counts = f"{found['transfers']} transfers, {found['receipts']} receipts"
    if found["differences"]:
        return CheckResult(CheckStatus.WARN,
                           f"the chain and the hub's ledger differ in "
                           f"{len(found['differences'])} places ({counts})",
                           detail="\n".join(found["differences"]),
                           hint="`anet balance --reconcile` lists them (docs/payments.md, "
                                "Reconciling)")
    return CheckResult(CheckStatus.OK, f"the chain and the hub's ledger agree: {counts}")
