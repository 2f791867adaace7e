"""What the task layer asks the node's modules, through their hooks (docs/plugins.md).

The layer sees only this protocol, not the plugin manager or the node: ``anet_core.node``
implements it over the modules' ``anet_take_task`` and ``anet_policy_veto``.
"""

from __future__ import annotations

from typing import Protocol

from anet_core.records import InboundTask, PolicyVeto, TaskClaim
from anet_core.tasks.policy import InboundPolicy


class TaskHooks(Protocol):
    def take_task(self, task: InboundTask) -> TaskClaim | None:
        """The first module's claim on an inbound task (``anet_take_task``), or None."""
        ...

    def policy_vetoes(self, policy: InboundPolicy) -> list[PolicyVeto]:
        """What the modules object to ``policy`` (``anet_policy_veto``); may raise."""
        ...
