"""The spending tiers of ``modules.x402`` (docs/payments.md, "Paying for skills"): who may make
this node pay how much.

- automatic (``auto_max``): the node pays a quote by itself, per payment;
- agent (``agent_max`` per payment, ``agent_daily_max`` per UTC day): the node signs a payment
  its A2A client submitted; the day counts every payment signed below the operator;
- operator: ``anet pay`` on a terminal, no limit but the credit at the rail.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from enum import StrEnum

from anet_x402.config import X402Config


class Tier(StrEnum):
    AUTO = "auto"
    AGENT = "agent"
    OPERATOR = "operator"


BELOW_THE_OPERATOR = (Tier.AUTO, Tier.AGENT)
"""The tiers whose payments count against ``agent_daily_max``."""


def utc_day(at: float) -> str:
    """The UTC day of the unix time ``at`` (``2026-12-01``): the daily limit's unit."""
    return datetime.fromtimestamp(at, UTC).date().isoformat()


@dataclass(frozen=True)
class Limits:
    """The tiers of one configuration, in smallest units per asset."""

    config: X402Config

    @property
    def configured(self) -> bool:
        return bool(self.config.auto_max or self.config.agent_max)

    def auto_pays(self, asset: str, amount: int) -> bool:
        return amount <= self.config.limit(self.config.auto_max, asset)

    def agent_pays(self, asset: str, amount: int, spent_today: int) -> bool:
        """Within ``agent_max`` and, with what was already paid today, ``agent_daily_max``."""
        return (amount <= self.config.limit(self.config.agent_max, asset)
                and spent_today + amount <= self.config.limit(self.config.agent_daily_max, asset))
