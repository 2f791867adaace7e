"""Gates on inbound tasks: a module holds a task back until its requester meets a condition
(``anet_task_gate``; module x402 quotes priced skills with it), and acts on the end of a task
it let through (``anet_task_ending``: the payment settles). docs/plugins.md has the rules.

A task a gate holds waits for input (or fails) before any module or the inbox sees it; once the
gate passes it, it goes on with its first message and that message's request metadata
(``anet.gate_request``), marked ``anet.gate`` = the module. An answer whose check a stop
interrupted (the task still waits for input, the requester's message is the last one) is
offered to the gates again when the node takes tasks again.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace
from typing import Any, Protocol

from anet_core.protocol.tasks import Reason, TaskMetadata
from anet_core.records import (
    EndingTask,
    GateAction,
    GateVerdict,
    InboundTask,
    MessageLike,
    TaskGate,
)
from anet_core.store import Store, StoredTask, TaskRole
from anet_core.tasks.common import Effects, Services, new_id, state_of
from anet_core.tasks.hooks import TaskHooks
from anet_core.tasks.origin import ORIGIN, is_local_peer
from anet_core.wire import TaskState

log = logging.getLogger(__name__)

GATE = TaskMetadata.GATE
GATE_REQUEST = TaskMetadata.GATE_REQUEST


@dataclass(frozen=True)
class GateEnd:
    """How a task ends: a module's or the operator's end, as its gate let it through
    (``withheld``: the artifacts the task already has are dropped too; ``held``: the gate
    defers the end, the task stays as it is and the gate's module gives the end again)."""

    state: TaskState
    message: dict[str, Any] | None
    artifacts: list[dict[str, Any]]
    reason: Reason | None = None
    message_reply: bool = False
    withheld: bool = False
    held: bool = False


class Emit(Protocol):
    def __call__(self, stored: StoredTask, state: TaskState, effects: Effects, *,
                 message: dict[str, Any] | None = None, reason: Reason | None = None,
                 final_artifacts: list[dict[str, Any]] | None = None) -> None: ...


class HandOn(Protocol):
    def __call__(self, stored: StoredTask, inbound: InboundTask, effects: Effects, *,
                 offer: bool) -> None: ...


class TaskGates:
    """The provider's side of the gates: ``emit`` changes a task and tells its requester,
    ``hand_on`` offers it to the modules (else the inbox), as the provider does."""

    def __init__(self, *, store: Store, hooks: TaskHooks,
                 services: Services, emit: Emit,
                 hand_on: HandOn) -> None:
        self._store = store
        self._hooks = hooks
        self._services = services
        self._emit = emit
        self._hand_on = hand_on

    @staticmethod
    def admitted(stored: StoredTask) -> bool:
        """True once a gate passed the task: its answers go to its module, not the gates."""
        return GATE in stored.task.get("metadata", {})

    def gate(self, inbound: InboundTask) -> TaskGate | None:
        try:
            return self._hooks.task_gate(inbound)
        except Exception:
            # A gate that cannot decide must not let the task through unchecked.
            log.exception("event=task-gate-failed task=%s", inbound.task_id)
            return TaskGate(module="?", verdict=GateVerdict(
                GateAction.FAIL, "The agent could not check this request."))

    def apply(self, stored: StoredTask, gate: TaskGate, effects: Effects) -> None:
        if gate.verdict is not None:
            self._on_verdict(stored, gate.module, gate.verdict, effects)
            return
        check, module, task_id = gate.check, gate.module, stored.id
        if check is None:
            raise ValueError(f"the gate of module {module} gives neither a verdict nor a check")

        async def decide() -> None:
            try:
                verdict = await check()
            except Exception as error:
                log.exception("event=task-gate-check-failed task=%s module=%s", task_id, module)
                verdict = GateVerdict(GateAction.FAIL, "The agent could not check this request: "
                                                       f"{type(error).__name__}.")
            decided = Effects()
            with self._store.transaction():
                current = self._store.get_task(task_id, role=TaskRole.PROVIDER)
                if current is None or state_of(current.task).is_terminal \
                        or self.admitted(current):
                    log.info("event=gate-verdict-dropped task=%s module=%s", task_id, module)
                    return
                self._on_verdict(current, module, verdict, decided)
                self._services.keep(decided)
            await self._services.run(decided)

        effects.background.append(decide)

    def _on_verdict(self, stored: StoredTask, module: str, verdict: GateVerdict,
                    effects: Effects) -> None:
        for kind, data in verdict.records:
            effects.record(kind, **data)
        message = None if verdict.message is None else self._agent_message(stored,
                                                                             verdict.message)
        log.info("event=gate-verdict task=%s module=%s action=%s", stored.id, module,
                 verdict.action.value)
        if verdict.action is GateAction.HOLD:
            if message is None:
                raise ValueError(f"the gate of module {module} holds a task without a message")
            self._emit(stored, TaskState.TASK_STATE_INPUT_REQUIRED, effects, message=message)
        elif verdict.action is GateAction.FAIL:
            self._emit(stored, TaskState.TASK_STATE_FAILED, effects, message=message,
                       reason=Reason.PROVIDER_FAILED, final_artifacts=[])
        elif verdict.action is GateAction.CANCEL:
            self._emit(stored, TaskState.TASK_STATE_CANCELED, effects, message=message,
                       reason=Reason.CANCELED_BY_REQUESTER, final_artifacts=[])
        else:
            stored.task.setdefault("metadata", {})[GATE] = module
            if message is not None or state_of(stored.task).is_interrupted:
                self._emit(stored, TaskState.TASK_STATE_WORKING, effects, message=message)
            else:
                self._store.save_task(stored)  # the gate's name: handing on writes no task
            self._hand_on(stored, self._first_request(stored), effects, offer=True)

    def _first_request(self, stored: StoredTask) -> InboundTask:
        """The task as it came in, for the modules once a gate let it through."""
        metadata = stored.task.get("metadata", {})
        return InboundTask(task_id=stored.id, context_id=stored.context_id,
                           peer_aid=stored.peer_aid, trusted=self._trusted(stored.peer_aid),
                           skill=stored.skill, message=stored.task["history"][0],
                           metadata=metadata.get(GATE_REQUEST), origin=metadata.get(ORIGIN))

    def answer(self, stored: StoredTask, message: dict[str, Any],
               metadata: dict[str, Any] | None) -> InboundTask:
        """The requester's answer on a waiting task, as a gate is asked about it."""
        return InboundTask(task_id=stored.id, context_id=stored.context_id,
                           peer_aid=stored.peer_aid, trusted=self._trusted(stored.peer_aid),
                           skill=stored.skill, message=message, continued=True,
                           metadata=metadata, origin=stored.task.get("metadata", {}).get(ORIGIN),
                           question=stored.task["status"].get("message"))

    def _trusted(self, peer: str) -> bool:
        return is_local_peer(peer) or self._store.is_trusted(peer)

    @staticmethod
    def _agent_message(stored: StoredTask, message: MessageLike) -> dict[str, Any]:
        body = {"parts": [{"text": message}]} if isinstance(message, str) else dict(message)
        return {"messageId": new_id(), "role": "ROLE_AGENT"} | body | {
            "contextId": stored.context_id, "taskId": stored.id}

    def recheck_answers(self) -> Effects:
        """At start: an answer a gate was checking when the node stopped (the task still waits
        for input, and the requester's message is the last one) is offered to the gates again;
        the requester will not send it twice."""
        effects = Effects()
        with self._store.transaction():
            for stored in self._store.tasks_in_states(
                    TaskRole.PROVIDER, {TaskState.TASK_STATE_INPUT_REQUIRED.value}):
                history = stored.task.get("history", [])
                if self.admitted(stored) or stored.served_by is not None \
                        or len(history) < 2 or history[-1].get("role") != "ROLE_USER":
                    continue
                gate = self.gate(self.answer(stored, history[-1], None))
                if gate is not None:
                    log.info("event=answer-rechecked task=%s module=%s", stored.id, gate.module)
                    self.apply(stored, gate, effects)
        return effects

    async def end(self, stored: StoredTask, end: GateEnd, effects: Effects) -> GateEnd:
        """The end of a task a gate admitted, as that gate lets it through (``anet_task_ending``);
        any other task's end unchanged."""
        module = stored.task.get("metadata", {}).get(GATE)
        if module is None:
            return end
        ending = EndingTask(task_id=stored.id, peer_aid=stored.peer_aid, skill=stored.skill,
                            gate=module, state=end.state.value, message=end.message,
                            artifacts=list(end.artifacts), task=stored.task,
                            reason=None if end.reason is None else end.reason.value,
                            message_reply=end.message_reply)
        try:
            gate = self._hooks.task_ending(ending)
            verdict = None if gate is None else gate.verdict if gate.verdict is not None \
                else None if gate.check is None else await gate.check()
        except Exception as error:
            log.exception("event=task-ending-failed task=%s module=%s", stored.id, module)
            verdict = GateVerdict(GateAction.FAIL, f"The agent could not finish this task: "
                                                   f"{type(error).__name__}.")
        if verdict is None:
            return end
        for kind, data in verdict.records:
            effects.record(kind, **data)
        log.info("event=gate-ending task=%s module=%s action=%s", stored.id, module,
                 verdict.action.value)
        note = None if verdict.message is None else self._agent_message(stored, verdict.message)
        if verdict.action is GateAction.FAIL:
            return GateEnd(TaskState.TASK_STATE_FAILED, note, [], Reason.PROVIDER_FAILED,
                           withheld=True)
        if verdict.action is GateAction.CANCEL:
            return GateEnd(TaskState.TASK_STATE_CANCELED, note, [], Reason.CANCELED_BY_REQUESTER,
                           withheld=True)
        if verdict.action is GateAction.HOLD:
            return replace(end, held=True)
        if note is None:
            return end
        if end.message is None:
            return replace(end, message=note)
        metadata = end.message.get("metadata", {}) | note.get("metadata", {})
        return replace(end, message=end.message | {"metadata": metadata})
