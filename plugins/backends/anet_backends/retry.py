"""When to try a forward again: exponential backoff from 5 s up to ``retry.max_interval``, until
``retry.give_up_after``."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from anet_backends.config import Retry
from anet_core.api import Backoff, format_duration

FIRST_RETRY_AFTER_S = 5.0
"""The wait before the second attempt; each later wait doubles, up to ``max_interval``."""
REQUESTERS_NO_RESPONSE_AFTER = timedelta(minutes=15)
"""The requesters' ``node.no_response_after`` unless they changed it."""


@dataclass(frozen=True)
class RetryPlan:
    backoff: Backoff
    """Not jittered: the backend is this node's own, nobody else retries against it."""
    give_up_after_s: float

    @classmethod
    def of(cls, retry: Retry) -> RetryPlan:
        return cls(Backoff(FIRST_RETRY_AFTER_S, retry.max_interval.total_seconds()),
                   retry.give_up_after.total_seconds())

    def delay(self, attempts: int, elapsed_s: float) -> float | None:
        """The wait before the next attempt after ``attempts`` failed ones, ``elapsed_s`` after
        the first began; None when that attempt would start after ``give_up_after``."""
        wait = self.backoff.delay(attempts - 1)
        if elapsed_s + wait > self.give_up_after_s:
            return None
        return wait


def retry_warning(retry: Retry) -> str | None:
    """Why ``retry.give_up_after`` may outlast the requesters' patience, or None: a requester
    fails a task that heard nothing for its ``no_response_after`` (15 minutes unless its
    operator changed it), so a forward still retried after that answers nobody."""
    if retry.give_up_after <= REQUESTERS_NO_RESPONSE_AFTER:
        return None
    return (f"retry.give_up_after {format_duration(retry.give_up_after)} is longer than "
            f"requesters wait for an answer (their no_response_after, "
            f"{format_duration(REQUESTERS_NO_RESPONSE_AFTER)} by default): their tasks fail "
            "before the forward gives up; keep it below")
