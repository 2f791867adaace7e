"""The one backoff, failover order and token bucket (anet_core.util.backoff)."""

from __future__ import annotations

import math

import pytest

from anet_core.util.backoff import Backoff, Failover, TokenBucket


def test_backoff_doubles_to_its_cap_exactly_without_jitter():
    backoff = Backoff(first_s=0.5, cap_s=30.0)
    delays = [backoff.delay(retry) for retry in range(12)]
    assert delays[:4] == [0.5, 1.0, 2.0, 4.0] and delays[-1] == 30.0
    assert delays == sorted(delays)
    assert backoff.delay(-3) == 0.5 and backoff.delay(10**6) == 30.0


def test_jittered_waits_stay_in_the_upper_part_of_their_ceiling():
    backoff = Backoff(first_s=1.0, cap_s=8.0, jitter=0.5)
    waits = [backoff.delay(retry) for retry in range(6) for _ in range(50)]
    ceilings = [backoff.ceiling(retry) for retry in range(6) for _ in range(50)]
    assert all(ceiling / 2 <= wait <= ceiling for wait, ceiling in zip(waits, ceilings,
                                                                       strict=True))
    assert len({round(backoff.delay(5), 9) for _ in range(20)}) > 1


@pytest.mark.parametrize("first_s, cap_s", [(0, 1.0), (-1.0, 1.0), (1.0, 0), (1.0, -5.0),
                                            (math.nan, 1.0), (1.0, math.inf)])
def test_a_wait_that_would_spin_is_refused(first_s, cap_s):
    with pytest.raises(ValueError, match="positive number of seconds"):
        Backoff(first_s=first_s, cap_s=cap_s)


@pytest.mark.parametrize("jitter", [-0.1, 1.0, 2.0])
def test_jitter_is_a_fraction_below_one(jitter):
    with pytest.raises(ValueError, match="jitter"):
        Backoff(first_s=1.0, cap_s=2.0, jitter=jitter)


def test_take_refuses_with_the_wait_and_refills_at_the_rate():
    bucket = TokenBucket(10.0, 2, now=0.0)
    assert [bucket.take(0.0) for _ in range(2)] == [0.0, 0.0]
    assert bucket.take(0.0) == pytest.approx(0.1)  # nothing taken: still 0.1 s away
    assert bucket.take(0.05) == pytest.approx(0.05)
    assert bucket.take(0.11) == 0.0
    assert not bucket.is_full(0.11) and bucket.is_full(0.4)


def test_reserve_runs_into_debt_in_order_and_hold_parks_the_bucket():
    bucket = TokenBucket(10.0, 2, now=0.0)
    assert [bucket.reserve(0.0) for _ in range(4)] == pytest.approx([0.0, 0.0, 0.1, 0.2])
    bucket.refund()
    assert bucket.reserve(0.0) == pytest.approx(0.2)
    fresh = TokenBucket(10.0, 5, now=0.0)
    fresh.hold(1.0, now=0.0)
    assert fresh.reserve(0.0) == pytest.approx(1.0)


@pytest.mark.parametrize("rate, burst", [(0, 1), (-1.0, 1), (1.0, 0), (math.inf, 1)])
def test_a_bucket_that_cannot_refill_is_refused(rate, burst):
    with pytest.raises(ValueError, match="rate must be positive"):
        TokenBucket(rate, burst, now=0.0)


def test_failover_goes_round_the_urls_and_waits_only_after_a_round_without_a_connection():
    backoff = Backoff(first_s=1.0, cap_s=8.0)
    failover = Failover(("a", "b", "c"), backoff, jitter_s=0.5)
    tried = []
    for connected in (True, False, False, False, False, False, False, True):
        tried.append(failover.url)
        delay = failover.next(connected=connected)
        tried.append(delay)
    # a's connection ended: the next at once; b, c and a failed (a round since it): 1 s;
    # b, c and a failed again: 2 s; b connected, and ended: c at once, the steps start again.
    urls, delays = tried[::2], tried[1::2]
    assert urls == ["a", "b", "c", "a", "b", "c", "a", "b"]
    assert (delays[3], delays[6]) == (1.0, 2.0)
    assert all(0 <= delays[index] <= 0.5 for index in (0, 1, 2, 4, 5, 7))
    assert failover.rounds == 0 and failover.url == "c"


def test_failover_with_one_url_backs_off_from_its_first_step_after_each_failure():
    failover = Failover(("a",), Backoff(first_s=1.0, cap_s=8.0))
    assert [failover.next(connected=False) for _ in range(4)] == [1.0, 2.0, 4.0, 8.0]
    assert failover.next(connected=True) == 1.0 and failover.url == "a"
