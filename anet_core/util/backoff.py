"""Waiting before trying again, and pacing requests: one backoff, one failover order and one
token bucket.

The node's link reconnecting to its hub, the outbox handing a message to the hub, the link
giving an envelope to its receiver again and the backends module retrying a forward all wait
with :class:`Backoff`; the node's link to its hub and a hub's link to a federated hub go round
the other's instances with :class:`Failover`; the hub's per-node rate limit and the node's copy
of it are a :class:`TokenBucket`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from dataclasses import dataclass

MAX_DOUBLINGS = 64
"""Past this many doublings every delay is the cap anyway (and ``2 ** n`` stays a float)."""


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff: ``first_s`` before the first retry, doubling up to ``cap_s``.

    ``jitter`` is the fraction of each wait that is random: with 0.5 a wait lies in the upper
    half of its ceiling, so many nodes that lost one hub at the same instant do not return in
    step; with 0 the waits are exact (a retry against a local service, where nobody else
    waits). Every wait is at least ``(1 - jitter) * first_s``, never zero: a retry loop cannot
    spin.
    """

    first_s: float
    cap_s: float
    jitter: float = 0.0

    def __post_init__(self) -> None:
        for name, value in (("first_s", self.first_s), ("cap_s", self.cap_s)):
            if not (isinstance(value, int | float) and math.isfinite(value) and value > 0):
                raise ValueError(f"Backoff {name}={value!r}: a wait must be a positive number "
                                 "of seconds, or the retries would spin")
        if not 0 <= self.jitter < 1:
            raise ValueError(f"Backoff jitter={self.jitter!r}: use a fraction from 0 up to, "
                             "not including, 1")

    def ceiling(self, retry: int) -> float:
        """The longest wait before retry number ``retry`` (0 for the first retry)."""
        return min(self.cap_s, self.first_s * 2.0 ** min(max(retry, 0), MAX_DOUBLINGS))

    def delay(self, retry: int) -> float:
        """The wait before retry number ``retry`` (0 for the first retry)."""
        ceiling = self.ceiling(retry)
        if not self.jitter:
            return ceiling
        return ceiling * (1 - self.jitter) + random.uniform(0, ceiling * self.jitter)


@dataclass
class Failover:
    """Which of the URLs of one service (a hub's instances) a link tries next, and after how
    long: a connection that ended is followed by the next URL at once (within ``jitter_s``,
    drawn at random, so that the clients of an instance that died do not all arrive at the next
    together); a round of them all that failed, and with one URL each failure, by a wait of
    ``backoff``, whose steps start again after a connection."""

    urls: tuple[str, ...]
    backoff: Backoff
    jitter_s: float = 1.0
    """The next URL is tried within this after a connection ended (1 s for both links)."""
    index: int = 0
    failures: int = 0
    """Attempts in a row that got no connection."""
    rounds: int = 0
    """Rounds in a row that got none: the step of :attr:`backoff`."""

    @property
    def url(self) -> str:
        """The URL to try now."""
        return self.urls[self.index]

    def update(self, urls: Sequence[str]) -> None:
        """Try ``urls`` from now on (the service told of its instances), going on from the URL
        tried now when it is still one of them."""
        current, self.urls = self.url, tuple(urls)
        self.index = self.urls.index(current) if current in self.urls else 0

    def next(self, *, connected: bool) -> float:
        """Move on after an attempt at :attr:`url` (``connected``: it got a connection, which
        has ended now); the seconds to wait before the attempt at the next one."""
        self.failures = 0 if connected else self.failures + 1
        if connected:
            self.rounds = 0
        self.index = (self.index + 1) % len(self.urls)
        if self.failures and self.failures % len(self.urls) == 0:
            self.rounds += 1
            return self.backoff.delay(self.rounds - 1)
        if len(self.urls) > 1:
            return random.uniform(0, self.jitter_s)
        return self.backoff.delay(0)


class TokenBucket:
    """``rate`` tokens a second up to ``burst``; one request takes one token. It starts full.

    :meth:`take` takes a token only when there is one (the hub's admission: refuse, and say
    when to come back); :meth:`reserve` takes one in any case, running into debt, so that
    callers who reserve in turn wait in that order (the node pacing itself to the hub's limits).
    The clock is the caller's (``now``, monotonic seconds), so the bucket is plain arithmetic.
    """

    __slots__ = ("burst", "rate", "stamp", "tokens")

    def __init__(self, rate: float, burst: float, *, now: float) -> None:
        if not (math.isfinite(rate) and rate > 0) or not (math.isfinite(burst) and burst >= 1):
            raise ValueError(f"a token bucket of {rate!r} tokens/s and burst {burst!r}: the "
                             "rate must be positive and the burst at least 1")
        self.rate = float(rate)
        self.burst = float(burst)
        self.tokens = self.burst
        self.stamp = now

    def refill(self, now: float) -> None:
        self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
        self.stamp = now

    def take(self, now: float) -> float:
        """0 when a token was taken, else the seconds until one is there (none is taken)."""
        self.refill(now)
        if self.tokens >= 1:
            self.tokens -= 1
            return 0.0
        return (1 - self.tokens) / self.rate

    def reserve(self, now: float) -> float:
        """Take a token, into debt if need be; the seconds to wait before using it."""
        self.refill(now)
        self.tokens -= 1
        return max(0.0, -self.tokens / self.rate)

    def refund(self) -> None:
        """Give back a reserved token that was not used."""
        self.tokens += 1

    def hold(self, seconds: float, now: float) -> None:
        """No token is to be had for ``seconds`` from ``now``."""
        self.refill(now)
        self.tokens = min(self.tokens, 1 - seconds * self.rate)

    def is_full(self, now: float) -> bool:
        """Full by ``now``: the bucket holds nothing a new one would not."""
        return self.tokens + (now - self.stamp) * self.rate >= self.burst
