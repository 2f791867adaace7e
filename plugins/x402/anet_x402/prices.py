"""What this node charges: ``modules.x402.prices`` as x402 quotes on hub rails
(docs/payments.md, "Charging for skills").

A quote is a v2 ``PaymentRequired`` with one ``PaymentRequirements`` per rail the price accepts
and the node can reach: scheme ``exact``, network ``anet:<hub AID>``, the amount in the asset's
smallest unit, ``payTo`` this node's AID, ``extra.task`` the task and ``extra.hubUrl`` where the
rail's facilitator listens. The rail of the home hub is known from the hub pin the link keeps
(``hub-pin.json``: the AID the hub proved at the last registration).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from anet_core.api import DataPaths
from anet_core.protocol.amounts import RAIL_SCHEME, format_amount, rail_network
from anet_core.protocol.tasks import ANY_SKILL
from anet_x402.config import HOME_RAIL, Price
from anet_x402.rail import RailError, rail_url

if TYPE_CHECKING:  # x402's models load at the first quote (docs/performance.md, "Idle memory")
    from x402.schemas import PaymentRequired, PaymentRequirements

QUOTE_TIMEOUT_S = 600
"""``maxTimeoutSeconds`` of every requirement: how long the payee waits for the work and its
settlement once paid."""
X402_VERSION = 2


@dataclass(frozen=True)
class Rail:
    """A hub rail this node can settle at: the hub's AID and its HTTP base URL."""

    hub_aid: str
    http_url: str

    @property
    def network(self) -> str:
        return rail_network(self.hub_aid)


def price_of(prices: dict[str, Price], skill: str | None) -> Price | None:
    """The price of a task for ``skill``: its own, else the price under ``"*"`` (every task no
    other price names, a task without a skill too), else none."""
    return prices.get(skill or "") or prices.get(ANY_SKILL)


def home_rail(paths: DataPaths) -> Rail | None:
    """The home hub's rail, from the pin of the hub the node last registered at; None before
    the first registration."""
    try:
        pin = json.loads(paths.hub_pin.read_text(encoding="utf-8"))
        return Rail(hub_aid=str(pin["hubAid"]), http_url=rail_url(str(pin["url"])))
    except (OSError, ValueError, KeyError, TypeError, RailError):
        return None


def reachable_rails(price: Price, home: Rail | None,
                    others: dict[str, str] | None = None) -> list[Rail]:
    """The rails of ``price`` this node can settle at: the home hub's (``home`` or its AID),
    then each other hub whose rail URL ``others`` (``modules.x402.rail_urls``) gives. A hub
    whose URL this node does not know is left out."""
    others = others or {}
    rails: list[Rail] = []
    for name in dict.fromkeys(price.rails):
        if name == HOME_RAIL or (home is not None and name == home.hub_aid):
            if home is not None and home not in rails:
                rails.append(home)
        elif name in others:
            rails.append(Rail(hub_aid=name, http_url=others[name].rstrip("/")))
    return rails


def requirements(price: Price, rail: Rail, *, payee: str, task_id: str) -> PaymentRequirements:
    from x402.schemas import PaymentRequirements

    return PaymentRequirements(scheme=RAIL_SCHEME, network=rail.network, asset=price.asset,
                               amount=str(price.atomic), pay_to=payee,
                               max_timeout_seconds=QUOTE_TIMEOUT_S,
                               extra={"task": task_id, "hubUrl": rail.http_url})


def quote(skill: str, price: Price, rails: list[Rail], *, payee: str, task_id: str,
          error: str) -> PaymentRequired:
    """The quote of ``skill`` for the task ``task_id``: one option per rail."""
    from x402.schemas import PaymentRequired, ResourceInfo

    return PaymentRequired(
        x402_version=X402_VERSION, error=error,
        resource=ResourceInfo(url=f"anet:{payee}#{skill}",
                              description=f"the skill {skill} of {payee}: "
                                          f"{format_amount(price.atomic, price.asset)} "
                                          f"{price.asset}"),
        accepts=[requirements(price, rail, payee=payee, task_id=task_id) for rail in rails])


def dumped(model: Any) -> dict[str, Any]:
    """An x402 object as JSON (camelCase, unset fields left out)."""
    data: dict[str, Any] = model.model_dump(by_alias=True, exclude_none=True, mode="json")
    return data
