"""The rail's shared rules: prices, authorizations, settlements, balance requests."""

from __future__ import annotations

from pathlib import Path

import pytest

from anet_core.identity import Identity
from anet_core.protocol import amounts, payments
from anet_core.protocol.amounts import PaymentError


@pytest.fixture
def payer(tmp_path: Path) -> Identity:
    return Identity.create(tmp_path / "payer")


@pytest.fixture
def hub(tmp_path: Path) -> Identity:
    return Identity.create(tmp_path / "hub")


@pytest.mark.parametrize(("text", "asset", "atomic"), [
    ("0.05", "USD", 5), ("1", "USD", 100), ("12.5", "EUR", 1250), ("0.000001", "USDC", 1)])
def test_prices_are_counted_in_the_assets_smallest_unit(text: str, asset: str,
                                                         atomic: int) -> None:
    assert amounts.parse_amount(text, asset) == atomic
    assert amounts.parse_amount(amounts.format_amount(atomic, asset), asset) == atomic


@pytest.mark.parametrize(("text", "asset", "reason"), [
    ("-1", "USD", "not-a-price"), ("0", "USD", "not-a-price"), ("0.00", "USD", "not-a-price"),
    ("abc", "USD", "not-a-price"), ("1e3", "USD", "not-a-price"), (5, "USD", "not-a-price"),
    ("0.001", "USD", "too-many-decimals"), ("1", "DOGE", "unknown-asset")])
def test_a_bad_price_names_the_value(text: object, asset: str, reason: str) -> None:
    with pytest.raises(PaymentError) as refused:
        amounts.parse_amount(text, asset)
    assert refused.value.reason == reason
    assert repr(text) in str(refused.value) or asset in str(refused.value)


def test_a_rail_is_named_after_its_hub(hub: Identity) -> None:
    assert amounts.rail_hub(amounts.rail_network(hub.aid)) == hub.aid
    with pytest.raises(PaymentError, match="eip155:8453"):
        amounts.rail_hub("eip155:8453")


def _authorization(payer: Identity, hub: Identity, **changes: object) -> dict[str, object]:
    return payments.sign_authorization(
        payer, payee=hub.aid, network=amounts.rail_network(hub.aid), asset="USD", amount=5,
        task="task-1", valid_for_s=600, now=1_000_000) | changes


def test_an_authorization_verifies_against_its_payer(payer: Identity, hub: Identity) -> None:
    checked = payments.verify_authorization(_authorization(payer, hub), payer.verified_history,
                                            now=1_000_001)
    assert (checked.payer, checked.amount, checked.task) == (payer.aid, "5", "task-1")
    assert len(checked.nonce) == 64


@pytest.mark.parametrize(("now", "reason"), [
    (1_000_600, "authorization-expired"), (999_000, "authorization-not-yet-valid")])
def test_an_authorization_outside_its_window_is_refused(payer: Identity, hub: Identity,
                                                        now: int, reason: str) -> None:
    with pytest.raises(PaymentError) as refused:
        payments.verify_authorization(_authorization(payer, hub), payer.verified_history,
                                      now=now)
    assert refused.value.reason == reason


def test_a_changed_or_foreign_authorization_is_refused(payer: Identity, hub: Identity) -> None:
    with pytest.raises(PaymentError) as changed:
        payments.verify_authorization(_authorization(payer, hub, amount="500"),
                                      payer.verified_history, now=1_000_001)
    assert changed.value.reason == "authorization-bad-signature"
    with pytest.raises(PaymentError) as foreign:
        payments.verify_authorization(_authorization(payer, hub), hub.verified_history,
                                      now=1_000_001)
    assert foreign.value.reason == "authorization-wrong-signer"


def test_a_settlement_is_signed_by_the_hub(payer: Identity, hub: Identity) -> None:
    authorization = payments.verify_authorization(_authorization(payer, hub),
                                                  payer.verified_history, now=1_000_001)
    settlement = payments.sign_settlement(hub, authorization, transaction="entry-7")
    assert payments.verify_settlement(settlement, hub.verified_history).transaction == "entry-7"
    with pytest.raises(PaymentError):
        payments.verify_settlement(settlement, payer.verified_history)


def test_a_balance_request_is_fresh_and_for_this_hub(payer: Identity, hub: Identity) -> None:
    request = payments.sign_balance_request(payer, hub_aid=hub.aid, now=1_000_000)
    checked = payments.verify_balance_request(request, payer.verified_history, hub_aid=hub.aid,
                                              now=1_000_100)
    assert (checked.hub, checked.at) == (hub.aid, 1_000_000)
    with pytest.raises(PaymentError, match="sign a fresh one"):
        payments.verify_balance_request(request, payer.verified_history, hub_aid=hub.aid,
                                        now=1_001_000)
