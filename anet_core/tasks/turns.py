"""The modules' turns on the tasks this node sent (requester side).

A task waiting for input is a turn the modules may act on: ``anet_requester_waiting`` when the
agent asks, ``anet_requester_answer`` when the client answers (docs/plugins.md); module x402
pays a quote there (docs/payments.md). A module's answer sends a message on the task in place
of the client's, holds the task with a reason, or lets the turn go on as without it. One turn
per task runs at a time, and the client hears of the agent's question only once a module's
waiting turn answered it (a quote paid at once is never shown as waiting). A client's cancel is
a turn too (``anet_requester_cancel``): module x402 voids the task's payment at its rail first.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import logging
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

from anet_core.protocol.tasks import TaskMetadata
from anet_core.records import CancelVerdict, RequesterTurn, TurnAnswer, TurnHandler
from anet_core.store import Store, StoredTask, TaskRole
from anet_core.tasks.common import Effects, Services, set_meta, set_status, state_of, status_event
from anet_core.tasks.hooks import TaskHooks
from anet_core.wire import TaskState

log = logging.getLogger(__name__)

ContinueTask = Callable[[StoredTask, dict[str, Any], Effects], StoredTask]
"""Sends a message on a task waiting for input (``Requester._continue``), inside a transaction."""


class TurnLocks:
    """One lock per task with a turn in progress; a task's lock goes when nobody holds it."""

    def __init__(self) -> None:
        self._locks: dict[str, tuple[asyncio.Lock, int]] = {}

    @asynccontextmanager
    async def hold(self, task_id: str) -> AsyncIterator[None]:
        lock, users = self._locks.get(task_id, (asyncio.Lock(), 0))
        self._locks[task_id] = (lock, users + 1)
        try:
            async with lock:
                yield
        finally:
            lock, users = self._locks[task_id]
            if users == 1:
                del self._locks[task_id]
            else:
                self._locks[task_id] = (lock, users - 1)


class RequesterTurns:
    """Asks the modules at each turn of a task this node sent, and carries out their answers."""

    def __init__(self, *, store: Store, hooks: TaskHooks, services: Services,
                 continue_task: ContinueTask) -> None:
        self._store = store
        self._hooks = hooks
        self._services = services
        self._continue = continue_task
        self.locks = TurnLocks()
        self._questions_held: set[tuple[str, int]] = set()
        """(task, stateSeq) of the agent's questions a module's waiting turn has not answered
        yet: the client has not heard of them."""

    def question_held(self, stored: StoredTask) -> bool:
        """Whether the task's current question still waits for a module's turn (the client is
        shown the task as worked on until then)."""
        return (stored.id, stored.state_seq) in self._questions_held

    async def first(self, aid: str, task_id: str, context_id: str, message: dict[str, Any],
                    metadata: dict[str, Any] | None) -> TurnAnswer:
        """The modules' answer turn on the first message of a new task: a hold rejects the
        task here, before anything is sent (docs/payments.md, "Reasons")."""
        task: dict[str, Any] = {"id": task_id, "contextId": context_id, "history": [
            message | {"contextId": context_id, "taskId": task_id}]}
        set_status(task, TaskState.TASK_STATE_SUBMITTED)
        turn = RequesterTurn(task_id=task_id, context_id=context_id, peer_aid=aid, task=task,
                             message=message, metadata=metadata,
                             extensions=frozenset(str(uri)
                                                  for uri in message.get("extensions", [])))
        return await self._client_turn(turn)

    async def answer(self, stored: StoredTask, message: dict[str, Any],
                     metadata: dict[str, Any] | None) -> TurnAnswer:
        """The modules' answer turn on the client's message to a task that waits for input
        (a task that does not: no turn, the message is refused as it is sent)."""
        if not state_of(stored.task).is_interrupted:
            return TurnAnswer()
        return await self._client_turn(self.turn_of(stored, message, metadata))

    async def _client_turn(self, turn: RequesterTurn) -> TurnAnswer:
        handler = self._hooks.requester_answer(turn)
        return TurnAnswer() if handler is None else await run_turn(handler, turn)

    async def cancel(self, stored: StoredTask) -> CancelVerdict:
        """The modules' say on the client's cancel of ``stored`` (call it holding the task's
        turn lock). A check that fails refuses the cancel: the task goes on, and the client
        may cancel again."""
        turn = self.turn_of(stored)
        check = self._hooks.requester_cancel(turn)
        if check is None:
            return CancelVerdict()
        try:
            return await check.run(turn)
        except Exception as error:
            log.exception("event=cancel-check-failed module=%s task=%s", check.module, stored.id)
            return CancelVerdict(refused="task-not-cancelable",
                                 message=f"the module {check.module} could not decide whether "
                                         f"task {stored.id} may be canceled now "
                                         f"({type(error).__name__}); it goes on",
                                 hint="cancel again in a moment; the daemon log says more")

    def ended(self, stored: StoredTask, status: dict[str, Any], effects: Effects) -> None:
        """The modules' records of the agent's end of ``stored`` (its final ``status``), kept
        in the transaction that applies it."""
        turn = self.turn_of(stored)
        turn.task["status"] = dict(status)
        for kind, data in self._hooks.requester_ended(turn):
            effects.record(kind, **data)

    def take_question(self, stored: StoredTask, events: list[dict[str, Any]] | None,
                      effects: Effects) -> bool:
        """Offer the agent's question on ``stored`` to the modules (inside the transaction that
        stored it); True when one takes it: its waiting turn runs once ``effects`` do, and
        ``events`` are published after it."""
        handler = self._hooks.requester_waiting(self.turn_of(stored))
        if handler is None:
            return False
        self._questions_held.add((stored.id, stored.state_seq))
        effects.background.append(functools.partial(self.waiting_turn, stored.id,
                                                    stored.state_seq, handler, events))
        return True

    def offer_waiting_tasks(self) -> Effects:
        """Offer every task waiting for input to the modules again (the daemon started): a turn
        a stop or crash interrupted is finished now."""
        effects = Effects()
        for stored in self._store.tasks_in_states(TaskRole.REQUESTER,
                                                  [TaskState.TASK_STATE_INPUT_REQUIRED.value]):
            self.take_question(stored, None, effects)
        return effects

    async def waiting_turn(self, task_id: str, state_seq: int, handler: TurnHandler,
                           events: list[dict[str, Any]] | None) -> None:
        """The agent's question on ``task_id`` (at ``state_seq``) goes to the module's
        handler; its answer is carried out, then the question's ``events`` (held back until
        now) are published unless the task moved on."""
        try:
            await self._waiting_turn(task_id, state_seq, handler, events)
        finally:
            self._questions_held.discard((task_id, state_seq))

    async def _waiting_turn(self, task_id: str, state_seq: int, handler: TurnHandler,
                            events: list[dict[str, Any]] | None) -> None:
        async with self.locks.hold(task_id):
            stored = self._waiting_at(task_id, state_seq)
            if stored is None:
                return
            answer = await run_turn(handler, self.turn_of(stored))
            effects = Effects()
            with self._store.transaction(durable=False):
                stored = self._waiting_at(task_id, state_seq)
                if stored is None:
                    return
                if answer.send is not None and self._store.message_task(
                        TaskRole.REQUESTER, stored.peer_aid, stored.context_id,
                        str(answer.send.get("messageId"))) is not None:
                    answer = TurnAnswer(evidence=answer.evidence)  # sent before: not again
                if answer.send is not None:
                    self._continue(stored, answer.send, effects)
                    effects.send = True
                elif answer.hold is not None:
                    self.keep_waiting(stored, answer, events or [], effects)
                elif events:
                    effects.publish(stored.task, events)
                for kind, data in answer.evidence:
                    effects.record(kind, **data)
                self._services.keep(effects)
            # The task as stored now shows what the turn decided: a client that subscribes
            # from here on must see it, not the "working" of a held question, or it would
            # miss the events published below (a blocking send would wait for ever).
            self._questions_held.discard((task_id, state_seq))
            await self._services.run(effects)

    def _waiting_at(self, task_id: str, state_seq: int) -> StoredTask | None:
        stored = self._store.get_task(task_id, role=TaskRole.REQUESTER)
        if stored is None or stored.state_seq != state_seq or \
                state_of(stored.task) is not TaskState.TASK_STATE_INPUT_REQUIRED:
            log.debug("event=turn-moved-on task=%s stateSeq=%d", task_id, state_seq)
            return None
        return stored

    def keep_waiting(self, stored: StoredTask, answer: TurnAnswer, events: list[dict[str, Any]],
             effects: Effects) -> None:
        """The task keeps waiting with the answer's reason and status message; ``events`` (the
        agent's question, held back) go out with it, its status as it is now."""
        task = stored.task
        status = answer.status
        shown = task["status"].get("message", {}).get("messageId")
        changed = task["metadata"].get(TaskMetadata.REASON) != answer.hold or (
            status is not None and status.get("messageId") != shown)
        if changed:
            if status is not None:
                set_status(task, state_of(task), message=status | {
                    "role": "ROLE_AGENT", "contextId": stored.context_id, "taskId": stored.id})
            set_meta(task, reason=answer.hold)
            stored.updated_at = time.time()
            self._store.save_task(stored)
        kept = [event for event in events if "statusUpdate" not in event]
        if kept or changed or events:
            effects.publish(task, [*kept, status_event(task)])

    @staticmethod
    def turn_of(stored: StoredTask, message: dict[str, Any] | None = None,
                metadata: dict[str, Any] | None = None) -> RequesterTurn:
        if message is None:
            clients = [sent for sent in stored.task.get("history", [])
                       if sent.get("role") == "ROLE_USER"]
            activated = clients[-1].get("extensions", []) if clients else []
        else:
            activated = message.get("extensions", [])
        return RequesterTurn(task_id=stored.id, context_id=stored.context_id,
                             peer_aid=stored.peer_aid, task=copy.deepcopy(stored.task),
                             message=message, metadata=metadata,
                             extensions=frozenset(str(uri) for uri in activated))


async def run_turn(handler: TurnHandler, turn: RequesterTurn) -> TurnAnswer:
    """The handler's answer; one that fails leaves the turn as it would be without it."""
    try:
        return await handler.run(turn)
    except Exception:
        log.exception("event=turn-failed module=%s task=%s", handler.module, turn.task_id)
        return TurnAnswer()
