"""Hub rails and amounts: the x402 names of a hub's rail, and amounts in an asset's smallest unit.

What the signed payment documents carry (anet_core/protocol/payments.py) and what operator
commands and checks print, kept apart from those documents so that printing an amount loads no
models (docs/performance.md, "The hub operator's commands load no models").
"""

from __future__ import annotations

import re
from decimal import Decimal

from anet_core.errors import ReasonError

RAIL_SCHEME = "exact"
RAIL_NAMESPACE = "anet"

ASSET_DECIMALS: dict[str, int] = {"USD": 2, "EUR": 2, "USDC": 6}
"""The assets a rail keeps, with the number of decimals of each (a price of ``0.001`` USD is
refused: a cent is the smallest unit)."""

_DECIMAL = re.compile(r"\d{1,30}(\.\d{1,30})?")


class PaymentError(ReasonError, ValueError):
    """A price, amount, rail or payment document that must be refused. ``reason`` (kebab-case):
    ``not-a-price``, ``unknown-asset``, ``too-many-decimals``, ``not-a-rail``, or, for a
    document, ``authorization-…``, ``settlement-…``, ``balance-request-…`` (what failed)."""


def rail_network(hub_aid: str) -> str:
    """The x402 ``network`` of the rail at the hub ``hub_aid`` (a CAIP-2 style ``ns:ref``)."""
    return f"{RAIL_NAMESPACE}:{hub_aid}"


def rail_hub(network: str) -> str:
    """The AID of the hub whose rail ``network`` names."""
    namespace, _, hub_aid = network.partition(":")
    if namespace != RAIL_NAMESPACE or not hub_aid:
        raise PaymentError("not-a-rail", f"the network {network!r} is not a hub rail; a rail is "
                                         f"named {RAIL_NAMESPACE}:<hub AID>")
    return hub_aid


def asset_decimals(asset: str) -> int:
    try:
        return ASSET_DECIMALS[asset]
    except KeyError:
        raise PaymentError("unknown-asset", f"the asset {asset!r} is not kept by hub rails; use "
                                            f"one of {', '.join(sorted(ASSET_DECIMALS))}") from None


def parse_amount(text: object, asset: str) -> int:
    """``text``, a positive decimal string such as ``"0.05"``, in the asset's smallest unit."""
    decimals = asset_decimals(asset)
    if not isinstance(text, str) or not _DECIMAL.fullmatch(text):
        raise PaymentError("not-a-price", f"the amount {text!r} is not a positive decimal "
                                          f"string; write it like \"0.05\"")
    value = Decimal(text)
    if value <= 0:
        raise PaymentError("not-a-price", f"the amount {text!r} is not positive")
    atomic = value.scaleb(decimals)
    if atomic != atomic.to_integral_value():
        raise PaymentError("too-many-decimals", f"the amount {text!r} has more decimals than "
                                                f"{asset} has ({decimals})")
    return int(atomic)


def format_amount(atomic: int, asset: str) -> str:
    """The decimal string of ``atomic`` smallest units of ``asset`` (``5`` USD cents → ``0.05``)."""
    decimals = asset_decimals(asset)
    return str(Decimal(atomic).scaleb(-decimals).quantize(Decimal(1).scaleb(-decimals)))
