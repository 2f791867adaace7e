"""The inbound policy: who may send tasks to this node, and the modules' vetoes of a policy.

The store keeps the policy's value; what it means (the table in docs/protocol.md, "Task
messages") is decided here and in ``provider.py``. Before the policy changes, and when the task
layer starts, every module is asked through ``anet_policy_veto`` whether it can live with it.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from enum import StrEnum
from typing import TYPE_CHECKING

from anet_core.records import PolicyVeto
from anet_core.tasks.common import TaskError

if TYPE_CHECKING:
    from anet_core.store import Store

log = logging.getLogger(__name__)


class InboundPolicy(StrEnum):
    """Who may send tasks to this node: nobody, peers on the trust list (default), anyone."""

    CLOSED = "closed"
    TRUSTED = "trusted"
    OPEN = "open"


DEFAULT_POLICY = InboundPolicy.TRUSTED


def policy_in(store: Store) -> InboundPolicy:
    """The policy in force: the one set last, else the default."""
    stored = store.inbound_policy
    return DEFAULT_POLICY if stored is None else InboundPolicy(stored)


def vetoes(ask: Callable[[InboundPolicy], list[PolicyVeto]],
           policy: InboundPolicy) -> list[PolicyVeto]:
    """What the modules object to ``policy``, as ``ask`` (``TaskHooks.policy_vetoes``) says. A
    failing check vetoes ``open``, so a broken module cannot open the node by accident; the
    stricter policies stay possible (logged)."""
    try:
        return ask(policy)
    except Exception as error:
        log.exception("event=policy-veto-failed policy=%s", policy.value)
        if policy is not InboundPolicy.OPEN:
            return []
        return [PolicyVeto(module="?", reason=f"a module's check failed: "
                                              f"{type(error).__name__}: {error}")]


def policy_refused(policy: InboundPolicy, refusals: list[PolicyVeto], *, hint: str) -> TaskError:
    reasons = "; ".join(f"{veto.reason} (module {veto.module})" for veto in refusals)
    return TaskError("policy-refused", f"the inbound policy {policy.value} is refused: {reasons}",
                     hint=hint)
