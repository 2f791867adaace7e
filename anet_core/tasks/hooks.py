"""What the task layer asks the node's modules, through their hooks (docs/plugins.md).

The layer sees only this protocol, not the plugin manager or the node: ``anet_core.node``
implements it over the modules' ``anet_take_task``, ``anet_task_gate``, ``anet_task_ending``,
``anet_policy_veto``, ``anet_requester_waiting``, ``anet_requester_answer``,
``anet_requester_cancel`` and ``anet_requester_ended``.
"""

from __future__ import annotations

from typing import Any, Protocol

from anet_core.records import (
    CancelCheck,
    EndingTask,
    InboundTask,
    PolicyVeto,
    RequesterTurn,
    TaskClaim,
    TaskGate,
    TurnHandler,
)
from anet_core.tasks.policy import InboundPolicy


class TaskHooks(Protocol):
    def take_task(self, task: InboundTask) -> TaskClaim | None:
        """The first module's claim on an inbound task (``anet_take_task``), or None."""
        ...

    def card_prices(self) -> dict[str, dict[str, Any]]:
        """The prices of the card's skills, as the modules give them (``SkillSource.prices``)."""
        ...

    def task_gate(self, task: InboundTask) -> TaskGate | None:
        """The first module's hold on an inbound task or answer (``anet_task_gate``), or None."""
        ...

    def task_ending(self, task: EndingTask) -> TaskGate | None:
        """The gate's hold on the end of a task it admitted (``anet_task_ending``), or None."""
        ...

    def policy_vetoes(self, policy: InboundPolicy) -> list[PolicyVeto]:
        """What the modules object to ``policy`` (``anet_policy_veto``); may raise."""
        ...

    def requester_waiting(self, turn: RequesterTurn) -> TurnHandler | None:
        """The first module's handler for an agent's question (``anet_requester_waiting``)."""
        ...

    def requester_answer(self, turn: RequesterTurn) -> TurnHandler | None:
        """The first module's handler for a client's answer (``anet_requester_answer``)."""
        ...

    def requester_cancel(self, turn: RequesterTurn) -> CancelCheck | None:
        """The first module's say on a client's cancel (``anet_requester_cancel``)."""
        ...

    def requester_ended(self, turn: RequesterTurn) -> list[tuple[str, dict[str, Any]]]:
        """Every module's evidence of the agent's end of a task (``anet_requester_ended``); a
        module that fails is logged and left out."""
        ...
