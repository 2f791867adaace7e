"""``modules.x402`` in config.json: the prices of this node's skills and its spending tiers
(docs/payments.md)."""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from anet_core.protocol.amounts import PaymentError, parse_amount

HOME_RAIL = "home"
"""In ``rails``: the rail of this node's home hub, whatever its AID."""

Tier = dict[str, str]
"""Asset code → the most that may be paid, as a decimal string: ``{"USD": "0.10"}``."""


class Price(BaseModel):
    """What one skill costs, and where the payment may settle."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    amount: str = Field(description='a positive decimal string, such as "0.05"')
    asset: str = Field(default="USD", description="an asset code the rails keep")
    rails: Annotated[list[str], Field(min_length=1)] = Field(
        default_factory=lambda: [HOME_RAIL],
        description='hub AIDs whose rail is accepted, or "home" for the home hub')

    @model_validator(mode="after")
    def _positive_in_the_asset(self) -> Price:
        try:
            parse_amount(self.amount, self.asset)
        except PaymentError as error:
            free = error.reason == "not-a-price" and _is_zero(self.amount)
            raise PaymentError(error.reason, f"{error.message}; a skill that costs nothing "
                                             "needs no price" if free else error.message) from None
        return self

    @property
    def atomic(self) -> int:
        return parse_amount(self.amount, self.asset)


def _is_zero(amount: str) -> bool:
    try:
        return Decimal(amount) == 0
    except ArithmeticError:
        return False


class X402Config(BaseModel):
    """``modules.x402``. Without a block the node charges nothing and pays nothing by itself."""

    model_config = ConfigDict(extra="forbid")

    prices: dict[str, Price] = Field(default_factory=dict,
                                     description='skill id (or "*": every other) → its price')
    rail_urls: dict[str, str] = Field(
        default_factory=dict,
        description="hub AID → the http(s) base URL of its rail, for the rails of hubs other "
                    "than the home hub that prices name")
    auto_max: Tier = Field(default_factory=dict,
                           description="paid by the node without asking, per payment")
    agent_max: Tier = Field(default_factory=dict,
                            description="paid when the client submits the payment, per payment")
    agent_daily_max: Tier = Field(default_factory=dict,
                                  description="the most paid in a UTC day below the operator")

    @field_validator("auto_max", "agent_max", "agent_daily_max")
    @classmethod
    def _amounts(cls, tier: Tier) -> Tier:
        for asset, amount in tier.items():
            try:
                parse_amount(amount, asset)
            except PaymentError as error:
                raise PaymentError(error.reason, f"{asset}: {error.message}; leave the asset out "
                                                 "to pay none of it in this tier"
                                   if _is_zero(amount) else f"{asset}: {error.message}") from None
        return tier

    @field_validator("rail_urls")
    @classmethod
    def _rail_urls(cls, urls: dict[str, str]) -> dict[str, str]:
        for aid, url in urls.items():
            if not url.startswith(("http://", "https://")):
                raise ValueError(f"rail_urls.{aid} is {url!r}: give the hub's http(s) base "
                                 "URL, such as http://hub.example:8765")
        return urls

    def limit(self, tier: Tier, asset: str) -> int:
        """The tier's limit for ``asset`` in its smallest unit; 0 when the tier omits it."""
        return parse_amount(tier[asset], asset) if asset in tier else 0


