"""The payee's hooks, delegated to from ``plugin``: the payment book's lifespan, the priced
skills on the card, the task gate and the task's end (see ``provider``)."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from anet_core.api import (
    EndingTask,
    InboundTask,
    Lifespan,
    Node,
    NodeKey,
    SkillSource,
    TaskGate,
)
from anet_x402.config import Price, X402Config
from anet_x402.prices import home_rail, reachable_rails
from anet_x402.provider import MODULE, PaymentDesk, payments_path
from anet_x402.quotes import PaymentBook

log = logging.getLogger(__name__)

DESK = NodeKey("x402-payment-desk", PaymentDesk)


def payee_lifespan(node: Node) -> Lifespan:
    @asynccontextmanager
    async def open_payee() -> AsyncIterator[None]:
        async with payee(node):
            yield

    return Lifespan(name="x402-payee", open=open_payee, module=MODULE)


@asynccontextmanager
async def payee(node: Node) -> AsyncIterator[None]:
    """The payment book open while the daemon runs; at start, the paid tasks a stop
    interrupted after their work ended are settled and ended."""
    book = PaymentBook(payments_path(node.paths))
    desk = PaymentDesk(node, book)
    node[DESK] = desk

    async def finish() -> None:
        try:
            await desk.finish_interrupted()
        except Exception:
            log.exception("event=paid-task-recovery-failed")

    recovery = asyncio.create_task(finish(), name="x402-recovery")
    try:
        yield
    finally:
        recovery.cancel()
        with suppress(asyncio.CancelledError):
            await recovery
        await desk.close()
        del node[DESK]
        book.close()


def priced_skills(node: Node) -> list[SkillSource]:
    config = node.config.module(MODULE, X402Config)
    prices = config.prices
    if not prices:
        return []
    home = home_rail(node.paths)

    async def read() -> list[dict[str, object]]:
        return []  # the skills themselves are the node's and its backends'; only their prices

    def networks(price: Price) -> list[str]:
        return [rail.network for rail in reachable_rails(price, home, config.rail_urls)]

    return [SkillSource(module=MODULE, read=read, prices={
        skill: {"amount": price.amount, "asset": price.asset, "networks": networks(price)}
        for skill, price in prices.items()})]


def gate(node: Node, task: InboundTask) -> TaskGate | None:
    desk = node.get(DESK)
    return None if desk is None else desk.gate(task)


def ending(node: Node, task: EndingTask) -> TaskGate | None:
    desk = node.get(DESK)
    if task.gate != MODULE or desk is None:
        return None

    async def check():  # type: ignore[no-untyped-def]
        return await desk.settle(task)

    return TaskGate(module=MODULE, check=check)
