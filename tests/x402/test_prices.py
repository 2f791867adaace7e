"""Which rails a price is quoted at (the home hub's, another hub's whose rail URL
``modules.x402.rail_urls`` gives), which price a task gets (its skill's, else ``"*"``), and
the refusal of a rail URL that is not http(s)."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from anet_x402.config import Price, X402Config
from anet_x402.prices import Rail, price_of, reachable_rails

HOME = Rail(hub_aid="h" * 32, http_url="http://127.0.0.1:8765")
OTHER = "o" * 32


def test_the_home_rail_and_a_known_other_rail_are_quoted_in_the_prices_order() -> None:
    price = Price(amount="0.50", rails=[OTHER, "home", "x" * 32])
    others = {OTHER: "https://rail.example:9000/"}
    assert reachable_rails(price, HOME, others) == [
        Rail(hub_aid=OTHER, http_url="https://rail.example:9000"), HOME]
    assert reachable_rails(price, HOME) == [HOME]  # no URL for the other hub: left out
    assert reachable_rails(price, None, others) == [
        Rail(hub_aid=OTHER, http_url="https://rail.example:9000")]  # not registered yet
    # The home hub named by its AID and as "home" is one option, not two.
    assert reachable_rails(Price(amount="1", rails=["home", HOME.hub_aid]), HOME) == [HOME]


def test_a_task_gets_its_skills_price_else_the_star_price() -> None:
    prices = {"translate": Price(amount="0.50"), "*": Price(amount="0.20")}
    assert price_of(prices, "translate") == prices["translate"]
    assert price_of(prices, "paint") == price_of(prices, None) == prices["*"]
    assert price_of({"translate": Price(amount="0.50")}, None) is None


def test_a_rail_url_that_is_not_http_is_refused_naming_it() -> None:
    with pytest.raises(ValidationError) as refused:
        X402Config.model_validate({"rail_urls": {OTHER: "ws://127.0.0.1:8765"}})
    assert "'ws://127.0.0.1:8765'" in str(refused.value) and OTHER in str(refused.value)


@pytest.mark.parametrize(("block", "named", "fix"), [
    ({"prices": {"s": {"amount": "0"}}}, "'0'", "a skill that costs nothing needs no price"),
    ({"prices": {"s": {"amount": "0.001"}}}, "'0.001'", "more decimals than USD"),
    ({"auto_max": {"USD": "0.00"}}, "USD: the amount '0.00'", "leave the asset out"),
    ({"agent_max": {"EUR": "-1"}}, "EUR: the amount '-1'", "positive decimal string"),
])
def test_a_zero_or_bad_amount_is_refused_naming_it_and_the_fix(block: dict[str, object],
                                                                named: str, fix: str) -> None:
    with pytest.raises(ValidationError) as refused:
        X402Config.model_validate(block)
    assert named in str(refused.value) and fix in str(refused.value), str(refused.value)
