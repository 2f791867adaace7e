"""Durations are validated where they are read, the backoff is bounded, and every way a forward
ends leaves anet.backend.failed in the evidence chain."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest
from pydantic import ValidationError

from anet_backends import retry
from anet_backends.config import Retry
from anet_backends.retry import RetryPlan, retry_warning
from anet_core.config import load_config
from anet_core.errors import AnetError
from anet_core.plugins import make_plugins
from anet_core.util.durations import parse_duration
from tests.backends.harness import inbound, make_harness

pytestmark = pytest.mark.timeout(30)


@pytest.mark.parametrize("value", ["0", "0s"])
def test_a_max_interval_that_would_spin_is_refused(value: str) -> None:
    with pytest.raises(ValidationError, match="positive"):
        Retry(max_interval=value)


def test_the_refusal_names_the_key_where_it_was_written(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"modules": {"backends": {"retry": {"max_interval": "0"}}}}))
    with pytest.raises(AnetError, match=r"modules\.backends\.retry\.max_interval"):
        load_config(path, make_plugins())


@pytest.mark.parametrize("text", ["99999999999999h", "1e400s", "9" * 400 + "s"])
def test_a_duration_beyond_any_use_is_refused_not_a_crash(text: str) -> None:
    with pytest.raises(ValueError, match="longer than|not a Go duration"):
        parse_duration(text)


def test_no_response_after_zero_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"node": {"no_response_after": "0"}}))
    with pytest.raises(AnetError, match=r"node\.no_response_after"):
        load_config(path, make_plugins())


def test_the_backoff_never_overflows() -> None:
    backoff = RetryPlan.of(Retry(max_interval="2m", give_up_after="1000h"))
    assert backoff.delay(1, 0.0) == retry.FIRST_RETRY_AFTER_S
    assert backoff.delay(5000, 0.0) == 120.0


def test_give_up_after_beyond_the_requesters_patience_is_a_warning() -> None:
    assert retry_warning(Retry()) is None
    assert retry_warning(Retry(give_up_after="15m")) is None
    warning = retry_warning(Retry(give_up_after="20m"))
    assert warning is not None and "20m" in warning and "no_response_after" in warning


async def test_a_forward_that_fails_in_its_own_bookkeeping_is_recorded(
        sock_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    harness = make_harness(f"unix://{sock_dir}/absent.sock", give_up_after="10s")

    def broken(attempts: int, elapsed_s: float) -> float | None:
        raise OverflowError("(34, 'Numerical result out of range')")

    monkeypatch.setattr(RetryPlan, "delay", lambda self, attempts, elapsed_s: broken(
        attempts, elapsed_s))
    recorder = await harness.serve(inbound("hello"))
    assert recorder.kinds() == ["fail"]
    assert harness.evidence_kinds() == ["backends.failed"]
    assert "OverflowError" in harness.evidence[0][1]["reason"]


def test_retry_defaults_stay_valid() -> None:
    assert Retry().max_interval == timedelta(minutes=2)
