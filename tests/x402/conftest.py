"""The module x402's tests: a real hub in this event loop and real nodes (skipped without the
x402 or hub module)."""

import pytest

pytest.importorskip("anet_x402")

from anet_x402 import provider
from tests.support.hubs import hub, hub_factory  # noqa: F401 - fixtures


@pytest.fixture
def quick_retries(monkeypatch: pytest.MonkeyPatch) -> None:
    """The payee's settle retries, seconds apart in production, close together here."""
    monkeypatch.setattr(provider, "SETTLE_RETRY_S", 0.05)
    monkeypatch.setattr(provider, "UNREACHABLE_RETRY_S", 0.3)
