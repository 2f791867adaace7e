"""The payer's credit at its home hub's rail, as the signing service needs it (through the rail
client, ``anet_x402.rail``). Read fresh before each signature; the proxy card uses the last
answer, kept fresh in the background."""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from anet_core.api import Identity
from anet_core.protocol.amounts import PaymentError, parse_amount
from anet_x402.rail import Balances, RailClient, RailError

log = logging.getLogger(__name__)

CARD_CREDIT_MAX_AGE_S = 60.0
"""The proxy card trusts a balance read this recently."""


def atomic_balances(found: Balances) -> dict[str, int]:
    """The rail's decimal strings in smallest units (an asset the rail cannot price holds
    nothing payable)."""
    balances = {}
    for asset, amount in found.balances.items():
        try:
            balances[asset] = parse_amount(amount, asset)
        except PaymentError:
            balances[asset] = 0
    return balances


@dataclass
class Credit:
    """This node's credit at its home hub's rail, in smallest units per asset."""

    identity: Identity
    hub_url: Callable[[], str | None]
    """The node's current hub URL (None when not joined)."""
    home_hub: str | None = None
    last: dict[str, int] = field(default_factory=dict)
    read_at: float = 0.0

    async def refresh(self) -> dict[str, int]:
        """Ask the home hub's rail; RailError when it cannot be asked."""
        url = self.hub_url()
        if not url:
            raise RailError("rail-unreachable", "this node has no home hub, so no rail")
        async with RailClient(url) as rail:
            found = await rail.balance(self.identity, hub_aid=self.home_hub)
        self.home_hub, self.last, self.read_at = found.hub, atomic_balances(found), time.time()
        return self.last

    async def holds(self, hub_aid: str, asset: str, amount: int) -> bool:
        """The rail of ``hub_aid`` holds at least ``amount`` of ``asset`` for this node. Only
        the home hub's rail is asked: a quote names the hub, and this node reaches one."""
        if self.home_hub is not None and hub_aid != self.home_hub:
            return False
        try:
            balances = await self.refresh()  # one request: it also learns the home hub's AID
            return hub_aid == self.home_hub and balances.get(asset, 0) >= amount
        except RailError as error:
            log.warning("event=credit-unknown hub=%s reason=%s message=%r", hub_aid,
                        error.reason, error.message)
            return False

    def payable_now(self) -> bool:
        """Some credit at the home hub's rail, read within :data:`CARD_CREDIT_MAX_AGE_S`."""
        return time.time() - self.read_at < CARD_CREDIT_MAX_AGE_S and \
            any(amount > 0 for amount in self.last.values())
