"""The provider side: who may send this node tasks, and how accepted tasks are served.

The inbound policy, the trust list and the modules decide acceptance:

- ``closed``: every new task is rejected (``rejected_by_policy``);
- ``trusted`` (the default): a trusted peer's task goes to the first module whose
  ``anet_take_task`` claims it, else it waits in the operator's inbox; a stranger's task is
  offered to the modules too (``InboundTask.trusted`` False) and is accepted only when one
  claims it, else rejected (``not_trusted``). A new node, with no module that serves strangers,
  accepts nothing from them;
- ``open``: every task is accepted; unclaimed ones wait in the inbox. Modules may veto this
  policy (``anet_policy_veto``): the backends module does while a backend accepts strangers.

Every change is sent back as a ``task.update`` numbered by ``stateSeq``; the terminal one
carries a signed receipt over the result. While a task waits here (inbox, or a module), a
``task.alive`` tells the requester it is not forgotten (``tasks/alive.py``).

A module's ``serve`` does not survive a restart: tasks it was serving move to the inbox when
the node starts again, so the operator can finish them (nothing is lost, nothing done twice).
A task that was waiting for the requester's input stays as it is: the requester's answer is
offered to the modules again (``InboundTask.continued``), and goes to the inbox if none claims it.

A module's gate (``anet_task_gate``; module x402 charges for skills with it) can hold a task
before any module or the inbox sees it: it waits for input (a quote) until the gate passes it on
with its first message, or fails it; the end of a task a gate passed is offered to that gate
first (``anet_task_ending``: the payment settles). An answer whose check a stop interrupted is
checked again when the node takes tasks again (``tasks/gates.py``). A stranger's task under
``trusted`` that no module would serve is rejected before any gate: it hears no quote.
"""

from __future__ import annotations

import asyncio
import logging
import time
from typing import Any

from anet_core.identity import Identity
from anet_core.link import HubLink
from anet_core.metrics import NodeMetrics
from anet_core.protocol.tasks import (
    ArtifactChunk,
    EffectStatus,
    Reason,
    TaskCancel,
    TaskMessage,
    TaskUpdate,
    wire_body,
)
from anet_core.records import InboundTask, TaskClaim
from anet_core.store import Store, StoredTask, TaskRole
from anet_core.tasks.common import (
    Effects,
    Services,
    TaskError,
    add_to_history,
    apply_artifact,
    artifact_event,
    new_id,
    set_meta,
    set_status,
    state_of,
    status_event,
    text_message,
)
from anet_core.tasks.gates import GATE_REQUEST, GateEnd, TaskGates
from anet_core.tasks.hooks import TaskHooks
from anet_core.tasks.origin import ORIGIN, is_local_peer
from anet_core.tasks.outbox import queue_message
from anet_core.tasks.policy import InboundPolicy, policy_in
from anet_core.tasks.receipts import issue_receipt
from anet_core.tasks.responder import TaskResponder
from anet_core.wire import TaskState

log = logging.getLogger(__name__)

REJECTION_NOTES = {
    Reason.REJECTED_BY_POLICY: "This agent accepts no tasks at the moment.",
    Reason.NOT_TRUSTED: "This agent accepts tasks only from agents on its trust list.",
}


RESTARTED_NOTE = ("The agent restarted while it worked on this task; the task waits for its "
                  "operator now.")


class Provider:
    """The tasks other agents send this node: accepted or refused, handed to a module or the
    operator's inbox, and each change sent back to the requester."""

    def __init__(self, *, store: Store, hub: HubLink, identity: Identity, hooks: TaskHooks,
                 metrics: NodeMetrics, services: Services) -> None:
        self._store = store
        self._hub = hub
        self._identity = identity
        self._hooks = hooks
        self._metrics = metrics
        self._services = services
        self._responders: dict[str, TaskResponder] = {}
        self._gates = TaskGates(store=store, hooks=hooks, services=services,
                                emit=self._emit, hand_on=self._hand_on)

    # --- inbound messages (called inside the receiving transaction) ---------------------------

    def on_message(self, sender: str, body: TaskMessage, *, offer: bool = True,
                   origin: dict[str, Any] | None = None) -> Effects:
        """A requester's message. ``offer`` False leaves a new task in the inbox without asking
        the modules; ``origin`` is what a local surface says of its caller (see tasks/local.py)."""
        effects = Effects()
        if self._store.message_task(TaskRole.PROVIDER, sender, body.context_id, body.message_id):
            log.info("event=message-repeated messageId=%s from=%s", body.message_id, sender)
            return effects
        stored = self._store.get_task(body.task_id)
        if stored is None:
            return self._new_task(sender, body, offer=offer, origin=origin)
        if stored.role is not TaskRole.PROVIDER or stored.peer_aid != sender \
                or stored.context_id != body.context_id:
            log.warning("event=message-refused reason=other-task from=%s task=%s", sender,
                        body.task_id)
            return effects
        if not state_of(stored.task).is_interrupted:
            log.warning("event=message-refused reason=not-waiting from=%s task=%s state=%s", sender,
                        stored.id, stored.state)
            return effects
        return self._continue(stored, body)

    def on_cancel(self, sender: str, body: TaskCancel) -> Effects:
        effects = Effects()
        stored = self._store.get_task(body.task_id, role=TaskRole.PROVIDER, peer_aid=sender)
        if stored is None or state_of(stored.task).is_terminal:
            log.info("event=cancel-ignored reason=nothing-to-cancel from=%s task=%s", sender,
                     body.task_id)
            return effects
        self._emit(stored, TaskState.TASK_STATE_CANCELED, effects,
                   reason=Reason.CANCELED_BY_REQUESTER, final_artifacts=[])
        return effects

    def _new_task(self, sender: str, body: TaskMessage, *, offer: bool,
                  origin: dict[str, Any] | None) -> Effects:
        effects = Effects()
        trusted = is_local_peer(sender) or self._store.is_trusted(sender)
        policy = policy_in(self._store)
        now = time.time()
        task: dict[str, Any] = {"id": body.task_id, "contextId": body.context_id,
                                "history": [body.message]}
        set_status(task, TaskState.TASK_STATE_SUBMITTED)
        set_meta(task, state_seq=0)
        if origin:
            task["metadata"][ORIGIN] = dict(origin)
        stored = StoredTask(id=body.task_id, role=TaskRole.PROVIDER, peer_aid=sender,
                            context_id=body.context_id, state=TaskState.TASK_STATE_SUBMITTED.value,
                            state_seq=0, skill=body.skill, task=task, receipt=None,
                            served_by=None, created_at=now, updated_at=now, last_heard_at=now)
        self._store.insert_task(stored)
        self._store.add_message(TaskRole.PROVIDER, sender, body.context_id, body.message_id,
                                body.task_id)
        inbound = InboundTask(task_id=body.task_id, context_id=body.context_id, peer_aid=sender,
                              trusted=trusted, skill=body.skill, message=body.message,
                              metadata=body.metadata, origin=origin,
                              blocking=bool(body.blocking))
        # A gate's hold tells the requester something (module x402: prices and rails): never
        # to a stranger the policy refuses, whom no module would serve.
        refused = policy is InboundPolicy.CLOSED or not offer or (
            policy is InboundPolicy.TRUSTED and not trusted and self._claim(inbound) is None)
        gate = None if refused else self._gates.gate(inbound)
        if gate is not None:
            if body.metadata:
                task["metadata"][GATE_REQUEST] = body.metadata
            log.info("event=task-held task=%s from=%s module=%s", body.task_id, sender,
                     gate.module)
            self._gates.apply(stored, gate, effects)
            return effects
        self._hand_on(stored, inbound, effects, offer=offer)
        return effects

    def _hand_on(self, stored: StoredTask, inbound: InboundTask, effects: Effects, *,
                 offer: bool) -> None:
        """Offer a task to the modules (unless ``offer`` is False); unclaimed, it waits in the
        inbox or is rejected by the policy and the trust rule."""
        policy, trusted, sender = policy_in(self._store), inbound.trusted, inbound.peer_aid
        claim = None if policy is InboundPolicy.CLOSED or not offer else self._claim(inbound)
        refusal = self._refusal(policy, trusted, claimed=claim is not None)
        if refusal is not None:
            log.info("event=task-rejected task=%s from=%s reason=%s", stored.id, sender,
                     refusal.value)
            note = text_message(REJECTION_NOTES[refusal], role="ROLE_AGENT",
                                context_id=stored.context_id, task_id=stored.id)
            self._emit(stored, TaskState.TASK_STATE_REJECTED, effects, message=note,
                       reason=refusal, final_artifacts=[])
            effects.record("task.rejected", taskId=stored.id, peer=sender,
                           reason=refusal.value)
            return
        if not trusted:
            log.info("event=untrusted-task-accepted task=%s from=%s module=%s policy=%s",
                     stored.id, sender, claim.module if claim else "none-inbox", policy.value)
        effects.record("task.accepted", taskId=stored.id, peer=sender, trusted=trusted,
                       skill=stored.skill, module=claim.module if claim else None)
        if claim is None:
            self._to_inbox(stored, effects)
        else:
            self._start_serving(stored, claim, inbound, effects)

    def _start_serving(self, stored: StoredTask, claim: TaskClaim, inbound: InboundTask,
                       effects: Effects) -> None:
        """Hand the task to ``claim``'s module. Writes only ``served_by``: the caller has
        stored every other change of ``stored`` (a new task was just inserted as it is)."""
        # No WORKING yet: the module says when it works (the backends module after a minute
        # without an answer), and a module that gives the task up at once (a backend refused
        # by its checks) must not move the requester's task from WORKING back to SUBMITTED.
        stored.served_by = claim.module
        self._store.set_served_by(stored.id, claim.module)
        responder = TaskResponder(self, inbound)
        self._responders[stored.id] = responder
        effects.background.append(lambda: self._serve(claim, inbound, responder))

    def _continue(self, stored: StoredTask, body: TaskMessage) -> Effects:
        effects = Effects()
        add_to_history(stored.task, body.message)
        self._store.add_message(TaskRole.PROVIDER, stored.peer_aid, stored.context_id,
                                body.message_id, stored.id)
        responder = self._responders.get(stored.id)
        if responder is None and not self._gates.admitted(stored):
            gate = self._gates.gate(self._gates.answer(stored, body.message, body.metadata))
            if gate is not None:
                self._store.save_task(stored)
                self._gates.apply(stored, gate, effects)
                return effects
        if responder is None and stored.served_by is not None:
            # The module that asked no longer serves the task (the daemon restarted): offer
            # the answer to the modules again; unclaimed, the operator gets it.
            self._resume(stored, body, effects)
        elif responder is None:
            self._to_inbox(stored, effects)
        else:
            self._emit(stored, TaskState.TASK_STATE_WORKING, effects)
            message, metadata, blocking = body.message, body.metadata, bool(body.blocking)

            async def deliver() -> None:
                responder.deliver(message, metadata, blocking=blocking)

            effects.background.append(deliver)
        return effects

    def _resume(self, stored: StoredTask, body: TaskMessage, effects: Effects) -> None:
        inbound = InboundTask(task_id=stored.id, context_id=stored.context_id,
                              peer_aid=stored.peer_aid,
                              trusted=is_local_peer(stored.peer_aid)
                              or self._store.is_trusted(stored.peer_aid), skill=stored.skill,
                              message=body.message, metadata=body.metadata, continued=True,
                              origin=stored.task.get("metadata", {}).get(ORIGIN),
                              blocking=bool(body.blocking))
        claim = self._claim(inbound)
        if claim is None:
            log.info("event=answer-to-inbox task=%s servedBy=%s reason=no-module", stored.id,
                     stored.served_by)
            self._to_inbox(stored, effects)
            return
        log.info("event=task-resumed task=%s module=%s", stored.id, claim.module)
        effects.record("task.resumed", taskId=stored.id, peer=stored.peer_aid,
                       module=claim.module, messageId=body.message_id)
        self._store.save_task(stored)  # the answer joined its history (_continue)
        self._start_serving(stored, claim, inbound, effects)

    @staticmethod
    def _refusal(policy: InboundPolicy, trusted: bool, *, claimed: bool) -> Reason | None:
        """Why a new task is rejected, if it is: the policy closed, or a stranger's task under
        the policy trusted that no module claimed."""
        if policy is InboundPolicy.CLOSED:
            return Reason.REJECTED_BY_POLICY
        if policy is InboundPolicy.TRUSTED and not trusted and not claimed:
            return Reason.NOT_TRUSTED
        return None

    def _claim(self, inbound: InboundTask) -> TaskClaim | None:
        try:
            return self._hooks.take_task(inbound)
        except Exception:
            log.exception("event=take-task-failed task=%s then=inbox", inbound.task_id)
            return None

    def _to_inbox(self, stored: StoredTask, effects: Effects, note: str | None = None) -> None:
        stored.served_by = None
        self._store.to_inbox(stored.id)
        # A task's state never goes backwards: one a module worked on and gave up stays WORKING
        # (anet.reason says it waits for the operator now).
        state = TaskState.TASK_STATE_WORKING if state_of(stored.task) is \
            TaskState.TASK_STATE_WORKING else TaskState.TASK_STATE_SUBMITTED
        message = None if note is None else text_message(
            note, role="ROLE_AGENT", context_id=stored.context_id, task_id=stored.id)
        self._emit(stored, state, effects, message=message, reason=Reason.QUEUED_FOR_OPERATOR)

    async def _serve(self, claim: TaskClaim, inbound: InboundTask,
                     responder: TaskResponder) -> None:
        try:
            await claim.serve(inbound, responder)
        except asyncio.CancelledError:
            raise  # the node stops; the task moves to the inbox when it starts again
        except Exception as error:
            log.exception("event=module-failed module=%s task=%s", claim.module, inbound.task_id)
            await responder.fail(f"the agent's module failed: {type(error).__name__}")
        else:
            # A module that returns while its question is open leaves the answer to the
            # operator: the requester's reply goes to the inbox.
            if not responder.ended and not self._leave_answer_to_operator(inbound.task_id):
                await responder.fail("the agent's module ended without an answer")
        finally:
            self._responders.pop(inbound.task_id, None)
            self.keep_now(responder.evidence)  # made after its last call

    def _leave_answer_to_operator(self, task_id: str) -> bool:
        """True when the task waits for input: its module is forgotten, so the answer goes to
        the inbox and is not offered to the modules again."""
        with self._store.transaction(durable=False):
            stored = self._store.get_task(task_id, role=TaskRole.PROVIDER)
            if stored is None or not state_of(stored.task).is_interrupted:
                return False
            stored.served_by = None
            self._store.save_task(stored)
            return True

    # --- the operator's path and the responder's reports --------------------------------------

    def inbox(self) -> list[dict[str, Any]]:
        """Tasks waiting for the operator, oldest first, with the requester's AID."""
        return [stored.task | {"peer": stored.peer_aid, "skill": stored.skill}
                for stored in self._store.inbox()]

    def received(self, task_id: str) -> dict[str, Any] | None:
        """A task this node received (in the inbox or not), with the requester's AID."""
        stored = self._store.get_task(task_id, role=TaskRole.PROVIDER)
        return None if stored is None else stored.task | {"peer": stored.peer_aid,
                                                           "skill": stored.skill}

    async def reply(self, task_id: str, text: str, *,
                    input_required: bool = False) -> dict[str, Any]:
        """Answer an inbox task: complete it with ``text`` as its artifact, or ask for input."""
        stored = self._inbox_task(task_id)
        effects = Effects()
        if input_required:
            question = text_message(text, role="ROLE_AGENT", context_id=stored.context_id,
                                    task_id=stored.id)
            with self._store.transaction(durable=False):
                self._emit(stored, TaskState.TASK_STATE_INPUT_REQUIRED, effects, message=question)
                self._services.keep(effects)
        else:
            answer = {"artifactId": new_id(), "name": "reply", "parts": [{"text": text}]}
            end = await self._gates.end(stored, GateEnd(TaskState.TASK_STATE_COMPLETED, None,
                                                    [answer]), effects)
            with self._store.transaction(durable=False):
                stored = self._inbox_task(task_id)
                self._end(stored, end, effects)
                self._services.keep(effects)
        await self._services.run(effects)
        return stored.task

    async def reject(self, task_id: str, reason: str | None = None) -> dict[str, Any]:
        """Refuse an inbox task; ``reason`` is shown to the requester."""
        stored = self._inbox_task(task_id)
        note = text_message(reason or "The operator declined this task.", role="ROLE_AGENT",
                            context_id=stored.context_id, task_id=stored.id)
        effects = Effects()
        end = await self._gates.end(stored, GateEnd(TaskState.TASK_STATE_REJECTED, note, [],
                                                Reason.REJECTED_BY_PROVIDER), effects)
        with self._store.transaction(durable=False):
            stored = self._inbox_task(task_id)
            self._end(stored, end, effects)
            if not end.held:
                effects.record("task.rejected", taskId=stored.id, peer=stored.peer_aid,
                               reason=Reason.REJECTED_BY_PROVIDER.value)
            self._services.keep(effects)
        await self._services.run(effects)
        return stored.task

    async def report(self, task_id: str, state: TaskState, *, message: dict[str, Any] | None,
                     chunks: list[ArtifactChunk], final_artifacts: list[dict[str, Any]] | None,
                     reason: Reason | None, message_reply: bool = False,
                     evidence: list[tuple[str, dict[str, Any]]] | None = None) -> None:
        """A responder's report, persisted and queued for the requester (``message_reply``:
        the terminal answer is a Message, not a Task; see Responder.reply_message).
        ``evidence``: the responder's records waiting for this change (Responder.record),
        kept in its transaction, before the change's own, and taken off the list."""
        evidence = [] if evidence is None else evidence
        effects = Effects()
        end: GateEnd | None = None
        stored: StoredTask | None = None
        if state.is_terminal:
            stored = self._store.get_task(task_id, role=TaskRole.PROVIDER)
            if stored is None or state_of(stored.task).is_terminal:
                self.keep_now(evidence)
                return
            waited = self._gates.admitted(stored)  # its gate's check may wait; no other does
            end = await self._gates.end(stored, GateEnd(state, message, final_artifacts or [],
                                                    reason, message_reply), effects)
            if waited:
                stored = None  # read it again: it may have changed meanwhile (a cancel)
        with self._store.transaction(durable=False):
            if stored is None:
                stored = self._store.get_task(task_id, role=TaskRole.PROVIDER)
            if stored is not None and not state_of(stored.task).is_terminal:
                if end is not None:
                    self._end(stored, end, effects)
                else:
                    self._emit(stored, state, effects, message=message, chunks=chunks,
                               final_artifacts=final_artifacts, reason=reason,
                               message_reply=message_reply)
            effects.evidence[:0] = evidence  # they came before the change
            self._services.keep(effects)  # even when nothing changed
        evidence.clear()  # that commit kept them; a rollback leaves them for the next change
        await self._services.run(effects)

    def keep_now(self, evidence: list[tuple[str, dict[str, Any]]]) -> None:
        """Keep a responder's records that no change of their task will carry (it ended), in
        the order they were made, and take them off the list."""
        for kind, data in evidence:
            self._services.evidence.record_later(kind, data)
        evidence.clear()

    def _end(self, stored: StoredTask, end: GateEnd, effects: Effects) -> None:
        if end.held:
            log.info("event=end-deferred task=%s", stored.id)
            return
        if end.withheld:
            stored.task.pop("artifacts", None)  # the work's artifacts go only with its payment
        self._emit(stored, end.state, effects, message=end.message, reason=end.reason,
                   final_artifacts=end.artifacts, message_reply=end.message_reply)

    async def release(self, task_id: str, reason: str,
                      evidence: list[tuple[str, dict[str, Any]]]) -> None:
        """A module gives a task up: it goes to the operator's inbox. ``evidence``: as for
        :meth:`report`."""
        effects = Effects()
        released = False
        with self._store.transaction(durable=False):
            stored = self._store.get_task(task_id, role=TaskRole.PROVIDER)
            if stored is not None and not state_of(stored.task).is_terminal:
                log.info("event=task-to-inbox task=%s module=%s reason=%r", task_id,
                         stored.served_by, reason)
                self._to_inbox(stored, effects)
                released = True
            effects.evidence[:0] = evidence
            self._services.keep(effects)
        evidence.clear()
        responder = self._responders.pop(task_id, None) if released else None
        if responder is not None:
            responder.end(cancelled=False)
        await self._services.run(effects)

    def recheck_answers(self) -> Effects:
        """At start: the answers a stop interrupted the gates' check of (``tasks/gates.py``)."""
        return self._gates.recheck_answers()

    def move_orphans_to_inbox(self) -> int:
        """At start: tasks a module was serving when the node stopped go to the operator,
        except those waiting for the requester's input: its answer is offered to the modules
        again when it comes (see :meth:`_continue`). Each requester is told (the update is
        queued in the outbox, which sends it once the node runs): its task waits for a person
        now, and a blocking send waiting for it ends."""
        moved = 0
        for stored in self._store.tasks_in_states(TaskRole.PROVIDER, _OPEN_STATES):
            if state_of(stored.task).is_interrupted:
                continue
            if stored.served_by is not None and not self._store.in_inbox(stored.id):
                log.info("event=orphan-to-inbox task=%s servedBy=%s", stored.id,
                         stored.served_by)
                with self._store.transaction(durable=False):
                    self._to_inbox(stored, Effects(), note=RESTARTED_NOTE)
                moved += 1
        return moved

    def _inbox_task(self, task_id: str) -> StoredTask:
        stored = self._store.get_task(task_id, role=TaskRole.PROVIDER)
        if stored is None or not self._store.in_inbox(task_id):
            raise TaskError("task-not-found", f"no task {task_id!r} waits in the inbox",
                            hint="`anet inbox` lists the tasks waiting for you")
        if state_of(stored.task).is_terminal:
            raise TaskError("task-terminal", f"task {task_id} has already ended")
        return stored

    def _emit(self, stored: StoredTask, state: TaskState, effects: Effects, *,
              message: dict[str, Any] | None = None, chunks: list[ArtifactChunk] | None = None,
              final_artifacts: list[dict[str, Any]] | None = None,
              reason: Reason | None = None, message_reply: bool = False) -> None:
        """Change the task, and queue the update that tells the requester (in the transaction)."""
        task = stored.task
        status = set_status(task, state, message=message)
        for chunk in chunks or ():
            apply_artifact(task, chunk.artifact, append=chunk.append)
        stored.state_seq += 1
        stored.state, stored.updated_at = state.value, time.time()
        set_meta(task, state_seq=stored.state_seq, reason=reason)
        update: dict[str, Any] = {"task_id": stored.id, "context_id": stored.context_id,
                                  "state_seq": stored.state_seq, "status": status,
                                  "artifact_chunks": chunks or [], "reason": reason}
        if state.is_terminal:
            for artifact in final_artifacts or ():
                apply_artifact(task, artifact, append=False)
            artifacts = task.get("artifacts", [])
            set_meta(task, effect=EffectStatus.DONE if state is TaskState.TASK_STATE_COMPLETED
                     else None)
            stored.receipt = issue_receipt(self._identity, task_id=stored.id,
                                           context_id=stored.context_id,
                                           requester=stored.peer_aid, status=status,
                                           artifacts=artifacts, state_seq=stored.state_seq)
            update |= {"artifact_chunks": [], "artifacts": artifacts, "receipt": stored.receipt}
            if message_reply and state is TaskState.TASK_STATE_COMPLETED:
                update["message_reply"] = True
        # Checks what a module reported (its messages and artifacts are checked nowhere else),
        # before anything outlives the transaction: a refusal rolls the change back and reaches
        # the module, whose responder can still fail the task.
        body = wire_body(TaskUpdate(**update))
        if state.is_terminal:
            self._store.out_of_inbox(stored.id)
            responder = self._responders.pop(stored.id, None)
            if responder is not None:
                responder.end(cancelled=state is TaskState.TASK_STATE_CANCELED)
            effects.record("task.answered", taskId=stored.id, peer=stored.peer_aid,
                           state=state.value, resultHash=stored.receipt["resultHash"])
        self._store.save_task(stored)
        if is_local_peer(stored.peer_aid):
            # No envelope for a local caller: its subscribers get the change as stream events.
            events = [artifact_event(task, artifact, append=False, last_chunk=True)
                      for artifact in update.get("artifacts", [])] if state.is_terminal else [
                artifact_event(task, chunk.artifact, append=chunk.append,
                               last_chunk=chunk.last_chunk) for chunk in chunks or ()]
            effects.publish(task, [*events, status_event(task)])
            return
        queue_message(self._store, self._hub, self._identity, stored.peer_aid, body,
                      task_id=stored.id, keys=self._services.seal_keys)
        effects.send = True


_OPEN_STATES = {state.value for state in TaskState if not state.is_terminal}

