"""The payer's book (anet_x402.spend) and tiers (anet_x402.tiers) on a real SQLite file: one
authorization per task and option until it expires, the day's spend by UTC day and tier."""

from __future__ import annotations

from pathlib import Path

from anet_x402.config import X402Config
from anet_x402.spend import RESEND_MARGIN_S, PayerBook, Signed
from anet_x402.tiers import Limits, Tier, utc_day

OPTION = {"scheme": "exact", "network": "anet:" + "h" * 32, "asset": "USD", "amount": "50",
          "payTo": "p" * 32, "maxTimeoutSeconds": 600, "extra": {"task": "t" * 32}}
NOON = 1_796_126_400.0  # 2026-12-01 12:00 UTC


def signed(nonce: str, tier: Tier = Tier.AGENT, amount: int = 50) -> Signed:
    return Signed(nonce=nonce * 64, task_id="t" * 32, tier=tier, asset="USD", amount=amount,
                  payload={"x402Version": 2, "nonce": nonce})


def test_one_authorization_per_task_and_option_until_it_expires(tmp_path: Path) -> None:
    book = PayerBook(tmp_path / "payer.db")
    book.record(signed("a"), OPTION, valid_before=int(NOON) + 600, now=NOON)
    again = PayerBook(tmp_path / "payer.db")  # a restart reads what was kept
    assert again.reusable("t" * 32, dict(reversed(list(OPTION.items()))), now=NOON) == \
        signed("a")
    assert again.reusable("t" * 32, OPTION | {"amount": "51"}, now=NOON) is None
    almost_over = NOON + 600 - RESEND_MARGIN_S
    assert again.reusable("t" * 32, OPTION, now=almost_over) is None
    book.close()
    again.close()


def test_the_day_counts_what_was_signed_below_the_operator(tmp_path: Path) -> None:
    book = PayerBook(tmp_path / "payer.db")
    book.record(signed("a", Tier.AUTO, 5), OPTION, valid_before=0, now=NOON)
    book.record(signed("b", Tier.AGENT, 50), OPTION, valid_before=0, now=NOON)
    book.record(signed("c", Tier.OPERATOR, 500), OPTION, valid_before=0, now=NOON)
    book.record(signed("d", Tier.AGENT, 70), OPTION, valid_before=0, now=NOON - 86_400)
    assert book.spent("USD", day=utc_day(NOON)) == 55
    assert book.spent("USD", day=utc_day(NOON - 86_400)) == 70
    assert book.spent("EUR", day=utc_day(NOON)) == 0
    book.close()


def test_tiers_per_payment_and_per_day() -> None:
    limits = Limits(X402Config(auto_max={"USD": "0.10"}, agent_max={"USD": "1.00"},
                               agent_daily_max={"USD": "1.50"}))
    assert limits.auto_pays("USD", 10) and not limits.auto_pays("USD", 11)
    assert not limits.auto_pays("EUR", 1)  # an asset a tier does not name is 0
    assert limits.agent_pays("USD", 100, spent_today=50)
    assert not limits.agent_pays("USD", 100, spent_today=51)
    assert not limits.agent_pays("USD", 101, spent_today=0)
    assert not Limits(X402Config()).configured
