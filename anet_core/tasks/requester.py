"""The requester side: local A2A tasks mapped to tasks at remote agents.

Task ids are made here (the remote agent uses the same id). A task's state changes only
through the provider's updates, applied in ``anet.state_seq`` order, and through what this node
decides itself: cancel, no answer for ``no_response_after``, a hub that refuses the message.

A task waiting for input is a turn the modules may act on (module x402 pays a quote there):
:mod:`anet_core.tasks.turns` asks them and carries out their answers.
"""

from __future__ import annotations

import copy
import logging
import time
from datetime import datetime
from typing import Any

from anet_core.identity import Identity, VerifiedHistory, check_aid
from anet_core.link import HubError, HubLink, JoinState, PeerInfo
from anet_core.protocol.tasks import (
    MAX_ID_LENGTH,
    EffectStatus,
    Reason,
    TaskAlive,
    TaskCancel,
    TaskMessage,
    TaskMetadata,
    TaskUpdate,
    wire_body,
)
from anet_core.records import TurnAnswer
from anet_core.store import OutboxEntry, Store, StoredTask, TaskRole
from anet_core.tasks.common import (
    Effects,
    Services,
    TaskError,
    TaskNotCancelable,
    add_to_history,
    apply_artifact,
    artifact_event,
    new_id,
    now_stamp,
    parse_client_message,
    set_meta,
    set_status,
    state_of,
    status_event,
    text_message,
)
from anet_core.tasks.events import TaskEvents, TaskSubscription
from anet_core.tasks.hooks import TaskHooks
from anet_core.tasks.listing import task_page
from anet_core.tasks.outbox import queue_message
from anet_core.tasks.receipts import check_receipt
from anet_core.tasks.turns import RequesterTurns
from anet_core.wire import ACTIVE_TASK_STATES, TaskState

log = logging.getLogger(__name__)

_QUEUED_HERE = frozenset({TaskMessage.model_fields["type"].default,
                          TaskCancel.model_fields["type"].default})
"""The bodies this side queues in the outbox."""
WAITING_FOR_THE_HUB = frozenset({Reason.HUB_STORAGE_FULL, Reason.HUB_UNREACHABLE})
"""What a task says while its message waits for the hub; the hub taking it ends that."""


class Requester:
    """The tasks this node sent: what the local A2A endpoint and the CLI ask, the provider's
    updates, and what this node decides itself."""

    def __init__(self, *, store: Store, hub: HubLink, identity: Identity, events: TaskEvents,
                 hooks: TaskHooks, services: Services) -> None:
        self._store = store
        self._hub = hub
        self._identity = identity
        self._aid = identity.aid
        self._events = events
        self._services = services
        self.turns = RequesterTurns(store=store, hooks=hooks, services=services,
                                    continue_task=self._continue)

    # --- the API the local A2A endpoint and the CLI use -------------------------------------

    async def send(self, aid: str, message: dict[str, Any], *, skill: str | None = None,
                   metadata: dict[str, Any] | None = None,
                   blocking: bool = False) -> dict[str, Any]:
        """Send an A2A message (wire JSON, role user) to the agent ``aid``; return the task.

        - (contextId, messageId) already sent to ``aid``: the existing task, nothing is sent;
        - no contextId and no taskId: a new task in a new context (never matched to earlier ones);
        - a taskId: continues that task when it waits for input (multi-turn);
        - while the hub cannot be reached (or cannot describe ``aid``), held: the message waits
          in the outbox and leaves when the hub is back, and a new task says why it waits
          (``hub_unreachable``), provided this node knows ``aid`` (:meth:`knows`);
        - refused without creating a task when the node has not joined a hub or waits for its
          approval, when ``aid`` is unknown (or unknown to this node while the hub is away), or
          when the message is invalid (:class:`TaskError`).

        ``metadata`` is the request-level metadata of the client's call; it travels beside the
        message (``task.message`` ``metadata``) to the agent, unchanged. ``blocking``: the
        client waits for the end of this turn in one call and sees no progress (``task.message``
        ``blocking``), so the agent need not report any.
        """
        self._check_remote(aid)
        parsed = parse_client_message(message)
        if skill is not None and len(skill) > MAX_ID_LENGTH:
            raise TaskError("invalid-params", f"the skill id is {len(skill)} characters long; "
                                              f"at most {MAX_ID_LENGTH} are accepted")
        continued = self._task_of(aid, parsed.task_id) if parsed.task_id else None
        if (continued is not None and parsed.context_id
                and parsed.context_id != continued.context_id):
            raise TaskError("invalid-message",
                            f"contextId {parsed.context_id!r} is not the context of task "
                            f"{continued.id} ({continued.context_id!r})",
                            hint="leave contextId out or give the task's own")
        context_id = continued.context_id if continued else parsed.context_id
        if context_id and (earlier := self._repeat(aid, context_id, parsed.message_id)):
            return earlier
        away = await self._hub_away(aid)
        if continued is not None:
            return await self._answer(continued.id, message, metadata, blocking=blocking)
        task_id, context_id = new_id(), context_id or new_id()
        first = await self.turns.first(aid, task_id, context_id, message, metadata)
        # Everything from here to the commit is synchronous: a concurrent identical send either
        # finds this one's key or this one finds its key, never both sending.
        if earlier := self._repeat(aid, context_id, parsed.message_id):
            return earlier
        effects = Effects(send=first.hold is None)
        with self._store.transaction(durable=False):
            stored = self._create(aid, message, context_id, skill, effects, metadata,
                                  task_id=task_id, refused=first, blocking=blocking)
            if away is not None and stored.state == TaskState.TASK_STATE_SUBMITTED:
                self._held_while_away(stored, away)
            self._services.keep(effects)
        await self._services.run(effects)
        return stored.task

    async def send_own(self, task_id: str, message: dict[str, Any]) -> dict[str, Any]:
        """Send ``message`` (A2A Message wire JSON, role user), written by a module of this node
        rather than a client, on the task ``task_id`` waiting for input; return the task. The
        modules' turn hooks are not asked. A message whose (contextId, messageId) was sent
        already is not sent again."""
        parsed = parse_client_message(message)
        async with self.turns.locks.hold(task_id):
            effects = Effects(send=True)
            with self._store.transaction(durable=False):
                stored = self._task_of(None, task_id)
                if earlier := self._repeat(stored.peer_aid, stored.context_id,
                                           parsed.message_id):
                    return earlier
                self._continue(stored, message, effects)
                self._services.keep(effects)
            await self._services.run(effects)
            return stored.task

    async def _answer(self, task_id: str, message: dict[str, Any],
                      metadata: dict[str, Any] | None, *, blocking: bool = False
                      ) -> dict[str, Any]:
        """The client's message on a task it continues: the modules' answer turn first."""
        async with self.turns.locks.hold(task_id):
            stored = self._task_of(None, task_id)
            message_id = str(message["messageId"])
            if earlier := self._repeat(stored.peer_aid, stored.context_id, message_id):
                return earlier  # a concurrent twin went first
            answer = await self.turns.answer(stored, message, metadata)
            effects = Effects()
            with self._store.transaction(durable=False):
                stored = self._task_of(None, task_id)
                if answer.hold is not None:
                    self.turns.keep_waiting(stored, answer, [], effects)
                else:
                    sent = message if answer.send is None else answer.send | {
                        "messageId": message_id}
                    self._continue(stored, sent, effects, metadata, blocking=blocking)
                    effects.send = True
                for kind, data in answer.evidence:
                    effects.record(kind, **data)
                self._services.keep(effects)
            await self._services.run(effects)
            return stored.task

    def get(self, aid: str | None, task_id: str) -> dict[str, Any]:
        """The task ``task_id`` of the agent ``aid`` (any agent when None)."""
        return self._task_of(aid, task_id).task

    def list(self, aid: str | None = None, *, context_id: str | None = None,
             state: TaskState | str | None = None, since: datetime | str | float | None = None,
             page_size: int = 50, page_token: str = "", history_length: int | None = None,
             include_artifacts: bool = False) -> dict[str, Any]:
        """A2A ListTasksResponse of the tasks sent to ``aid`` (all agents when None), newest
        first."""
        return task_page(self._store, TaskRole.REQUESTER, aid, context_id=context_id,
                         state=state, since=since, page_size=page_size, page_token=page_token,
                         history_length=history_length, include_artifacts=include_artifacts)

    def knows(self, aid: str) -> bool:
        """Whether ``aid`` is an agent as far as this node can tell without its hub: the
        directory answered for it lately, or this node keeps a task it sent it or had from
        it."""
        return self._hub.cached_peer(aid) is not None or any(
            self._store.has_tasks(role, aid) for role in TaskRole)

    async def cancel(self, aid: str | None, task_id: str) -> dict[str, Any]:
        """Cancel the task here and ask the provider to stop; return the task. The modules have
        their say first (``anet_requester_cancel``: module x402 voids a payment at its rail),
        and may refuse it (:class:`TaskNotCancelable` with their reason)."""
        async with self.turns.locks.hold(task_id):
            verdict = await self.turns.cancel(self._open_to_cancel(self._task_of(aid, task_id)))
            effects = Effects()
            for kind, data in verdict.evidence:
                effects.record(kind, **data)
            if verdict.refused is not None:
                await self._services.run(effects)  # the records, in a commit of their own
                raise TaskNotCancelable(verdict.refused, verdict.message, hint=verdict.hint)
            with self._store.transaction(durable=False):
                # Read again: an update may have ended the task while the modules decided.
                stored = self._open_to_cancel(self._task_of(aid, task_id))
                self._cancel_here(stored, effects)
                self._services.keep(effects)
        await self._services.run(effects)
        return stored.task

    @staticmethod
    def _open_to_cancel(stored: StoredTask) -> StoredTask:
        if state_of(stored.task).is_terminal:
            raise TaskNotCancelable("task-not-cancelable",
                                    f"task {stored.id} is already {TaskState(stored.state).word}")
        return stored

    def _cancel_here(self, stored: StoredTask, effects: Effects) -> None:
        """End the task canceled here; the provider is asked to stop when the task may have
        reached it (call inside a transaction)."""
        reached_hub = self._may_have_left(stored)
        self._store.outbox_withdraw(stored.id)
        if reached_hub:
            self._queue(stored.peer_aid, wire_body(TaskCancel(
                task_id=stored.id, context_id=stored.context_id)), task_id=stored.id)
            effects.send = True
        effect = EffectStatus.POSSIBLE if reached_hub else EffectStatus.NONE
        self._finish_here(stored, TaskState.TASK_STATE_CANCELED, Reason.CANCELED_BY_REQUESTER,
                          effect, None, effects)

    def subscribe(self, aid: str | None, task_id: str) -> TaskSubscription:
        """Events of the task: first the task as it is now, then its updates in order, ending
        after a terminal state. Taken in one step with the snapshot: nothing falls between."""
        stored = self._task_of(aid, task_id)
        snapshot = stored.task
        if self.turns.question_held(stored):
            # The client hears the agent's question once the module's turn answered it (a
            # quote paid at once is never shown as waiting): until then it is worked on.
            snapshot = copy.deepcopy(snapshot)
            set_status(snapshot, TaskState.TASK_STATE_WORKING)
        return self._events.subscribe(task_id, snapshot)

    async def agent(self, aid: str) -> PeerInfo:
        """The checked directory entry of the remote agent ``aid``; refused (:class:`TaskError`)
        for an invalid AID, this node's own, or an agent the hub does not know."""
        self._check_remote(aid)
        return await self._peer(aid)

    def peer_of(self, task_id: str) -> str:
        """The AID of the agent a task was sent to."""
        return self._task_of(None, task_id).peer_aid

    async def review(self, task_id: str, rating: int, text: str = "") -> dict[str, Any]:
        """Rate the agent that completed ``task_id`` at the hub, with its receipt as proof."""
        stored = self._task_of(None, task_id)
        if stored.receipt is None or state_of(stored.task) is not TaskState.TASK_STATE_COMPLETED:
            raise TaskError("task-not-reviewable",
                            f"task {task_id} has no receipt of a completed task",
                            hint="only a task the agent completed, with its signed receipt, can "
                                 "be reviewed")
        review = {"subject": stored.peer_aid, "rating": rating, "text": text,
                  "receipt": stored.receipt}
        try:
            await self._hub.post_review(review)
        except HubError as error:
            if error.reason != "review-duplicate":
                raise
            raise TaskError("review-duplicate", error.message,
                            hint="the hub counts one review per task") from None
        return review

    # --- updates from the provider ----------------------------------------------------------

    def on_update(self, sender: str, history: VerifiedHistory, update: TaskUpdate) -> Effects:
        """Apply an update in ``anet.state_seq`` order (call inside a transaction).

        A duplicate or older update is dropped. One that comes after a gap waits in the store
        until the gap fills, except a terminal update: it carries the whole result, so it is
        applied at once and the waiting ones are dropped.
        """
        effects = Effects(redelivered_if_lost=True)
        stored = self._store.get_task(update.task_id, role=TaskRole.REQUESTER, peer_aid=sender)
        if stored is None:
            log.warning("event=update-refused reason=no-such-task from=%s task=%s", sender,
                        update.task_id)
            return effects
        if update.state_seq <= stored.state_seq:
            log.debug("event=update-repeated task=%s stateSeq=%d", stored.id, update.state_seq)
            return effects
        if state_of(stored.task).is_terminal:
            self._late_update(stored, history, update, effects)
            return effects
        if update.state_seq > stored.state_seq + 1 and not update.state.is_terminal:
            log.info("event=update-held task=%s stateSeq=%d expected=%d", stored.id,
                     update.state_seq, stored.state_seq + 1)
            self._store.hold_update(stored.id, update.state_seq, wire_body(update))
            return effects
        self._apply(stored, history, update, effects)
        while not state_of(stored.task).is_terminal and (
                held := self._store.held_update(stored.id, stored.state_seq + 1)):
            self._apply(stored, history, TaskUpdate.model_validate(held), effects)
        self._store.drop_held_updates(stored.id, up_to=None if state_of(stored.task).is_terminal
                                      else stored.state_seq)
        return effects

    def _apply(self, stored: StoredTask, history: VerifiedHistory, update: TaskUpdate,
               effects: Effects) -> None:
        task = stored.task
        events: list[dict[str, Any]] = []
        previous = {key: task["status"].get(key) for key in ("state", "message")}
        previous_reason = task.get("metadata", {}).get(TaskMetadata.REASON)
        status = dict(update.status)
        status.setdefault("timestamp", now_stamp())
        task["status"] = status
        if "message" in status:
            add_to_history(task, status["message"])
        if update.state.is_terminal:
            final = update.artifacts or []
            before = {artifact["artifactId"]: artifact for artifact in task.get("artifacts", [])}
            task["artifacts"] = final
            # The answer first, then the terminal status: a client that stops reading at the
            # terminal state already holds it.
            events += [artifact_event(task, artifact, append=False, last_chunk=True)
                       for artifact in final if before.get(artifact["artifactId"]) != artifact]
            problem = self._receipt_problem(stored, history, update)
            stored.receipt = update.receipt if not problem else None
            set_meta(task, receipt_verified=not problem)
            if problem:
                log.warning("event=receipt-unverified task=%s from=%s problem=%r", stored.id,
                            stored.peer_aid, problem)
            effects.record("task.finished" if update.state is TaskState.TASK_STATE_COMPLETED
                           else "task.failed", taskId=stored.id, peer=stored.peer_aid,
                           state=update.state.value, reason=update.reason,
                           receiptVerified=not problem)
            self.turns.ended(stored, status, effects)
        for chunk in update.artifact_chunks:
            apply_artifact(task, chunk.artifact, append=chunk.append)
            events.append(artifact_event(task, chunk.artifact, append=chunk.append,
                                         last_chunk=chunk.last_chunk))
        set_meta(task, state_seq=update.state_seq, reason=update.reason,
                 effect=_effect_of(update.state))
        if update.message_reply and update.state is TaskState.TASK_STATE_COMPLETED:
            task["metadata"][TaskMetadata.MESSAGE_REPLY] = True
        # A changed anet.reason is news too (e.g. queued_for_operator: the task waits for a
        # person at the provider, not for its agent).
        if {key: status.get(key) for key in previous} != previous or update.state.is_terminal \
                or task["metadata"].get(TaskMetadata.REASON) != previous_reason:
            events.append(status_event(task))
        stored.state, stored.state_seq = update.state.value, update.state_seq
        stored.updated_at = stored.last_heard_at = time.time()
        self._store.save_task(stored)
        if update.state is TaskState.TASK_STATE_INPUT_REQUIRED and \
                self.turns.take_question(stored, events, effects):
            return  # the client hears the question once the module answered it
        if events:
            effects.publish(task, events)

    def _late_update(self, stored: StoredTask, history: VerifiedHistory, update: TaskUpdate,
                     effects: Effects) -> None:
        """The task ended here first (cancel, no answer); what the provider did still counts
        for ``anet.effect_status``, the receipt and the modules' records of the end, but the
        task's state stays as it is."""
        stored.state_seq = update.state_seq
        set_meta(stored.task, state_seq=update.state_seq)
        if update.state.is_terminal:
            problem = self._receipt_problem(stored, history, update)
            if not problem:
                stored.receipt = update.receipt
            set_meta(stored.task, receipt_verified=not problem, effect=_effect_of(update.state))
            self.turns.ended(stored, update.status, effects)
        self._store.save_task(stored)

    def _receipt_problem(self, stored: StoredTask, history: VerifiedHistory,
                         update: TaskUpdate) -> str:
        if update.receipt is None:
            return "the terminal update carries no receipt"
        return check_receipt(update.receipt, history, task_id=stored.id,
                             requester=self._aid, status=update.status,
                             artifacts=update.artifacts or [])

    def on_alive(self, sender: str, alive: TaskAlive, sent_at: float) -> Effects:
        """The provider says these tasks are still open there (call inside a transaction): a
        sign of life for ``no_response_after``, dated when the provider sealed it (never later
        than now), so a heartbeat that waited at the hub proves nothing newer. No state change,
        no event, ``anet.state_seq`` unchanged."""
        heard = self._store.heard_from(TaskRole.REQUESTER, sender,
                                       [task.task_id for task in alive.tasks], ACTIVE_TASK_STATES,
                                       min(sent_at, time.time()))
        log.debug("event=alive from=%s heard=%d of=%d", sender, heard, len(alive.tasks))
        return Effects()

    # --- what this node decides ------------------------------------------------------------

    async def fail_silent_tasks(self, no_response_after: float, now: float) -> Effects:
        """Fail tasks that waited longer than ``no_response_after`` seconds for any word. The
        modules have their say first, as on a cancel (module x402 voids a payment at its rail:
        a task whose payment settled is not given up); one they keep waits another period."""
        effects = Effects()
        for silent in self._store.tasks_in_states(TaskRole.REQUESTER, ACTIVE_TASK_STATES):
            if now - silent.last_heard_at < no_response_after:
                continue
            async with self.turns.locks.hold(silent.id):
                stored = self._store.get_task(silent.id, role=TaskRole.REQUESTER)
                if stored is None or not state_of(stored.task).is_active \
                        or now - stored.last_heard_at < no_response_after:
                    continue  # it moved on while another turn ran
                verdict = await self.turns.cancel(stored)
                for kind, data in verdict.evidence:
                    effects.record(kind, **data)
                with self._store.transaction(durable=False):
                    if verdict.refused is None:
                        note = self._give_up(stored, no_response_after, effects)
                    else:
                        stored.last_heard_at = time.time()
                        self._store.save_task(stored)
                        note = f"kept: {verdict.refused}"
                    self._services.keep(effects)
            log.warning("event=task-silent task=%s note=%r", stored.id, note)
        return effects

    def _give_up(self, stored: StoredTask, no_response_after: float, effects: Effects) -> str:
        """Fail a silent task here (inside a transaction); the note it ends with."""
        reached_hub = self._may_have_left(stored)
        self._store.outbox_withdraw(stored.id)
        note = (f"No answer from {stored.peer_aid} for {no_response_after:g} s" if reached_hub
                else f"The message could not be handed to the hub for {no_response_after:g} s")
        self._finish_here(stored, TaskState.TASK_STATE_FAILED, Reason.NO_RESPONSE,
                          EffectStatus.POSSIBLE if reached_hub else EffectStatus.NONE, note,
                          effects)
        return note

    def on_refused(self, entry: OutboxEntry, error: HubError) -> Effects:
        """The hub refused a message for good: a task still waiting fails (hub_refused)."""
        effects = Effects()
        stored = self._open_task_of(entry)
        if stored is None:
            return effects
        # Until the provider's first update the refused message is the task's only one.
        effect = EffectStatus.NONE if stored.state_seq == 0 else EffectStatus(
            stored.task["metadata"][TaskMetadata.EFFECT_STATUS])
        if error.unknown_agent:
            reason = Reason.UNKNOWN_AGENT
        elif error.reason == "not-federated":
            reason = Reason.NOT_FEDERATED
        else:
            reason = Reason.HUB_REFUSED
        self._store.outbox_withdraw(stored.id)
        self._finish_here(stored, TaskState.TASK_STATE_FAILED, reason, effect,
                          f"The hub refused the message: {error.message}", effects)
        return effects

    def _queue(self, peer_aid: str, body: dict[str, Any], *, task_id: str) -> None:
        queue_message(self._store, self._hub, self._identity, peer_aid, body, task_id=task_id,
                      keys=self._services.seal_keys)

    def _may_have_left(self, stored: StoredTask) -> bool:
        """Whether the provider can have the task's message: it answered, or the message was
        handed to the hub (the hub may have taken it, or took it and the entry is gone)."""
        return stored.state_seq > 0 or not self._store.outbox_only_unsent(stored.id)

    def _open_task_of(self, entry: OutboxEntry) -> StoredTask | None:
        """The open task an outbox entry of this side belongs to; None for an entry of the
        provider's (its updates share the outbox, and nothing here follows them) and for a
        task that ended or is gone."""
        if entry.body.get("type") not in _QUEUED_HERE:
            return None
        stored = self._store.get_task(entry.task_id, role=TaskRole.REQUESTER)
        return None if stored is None or state_of(stored.task).is_terminal else stored

    def on_accepted(self, entry: OutboxEntry) -> Effects:
        """The hub took a message of this task after more than one attempt. The task said
        ``possible`` since the message was queued, so only a task that waited for room at the
        hub (``on_deferred``) or for the hub itself (:meth:`_held_while_away`) changes: it waits
        no more."""
        effects = Effects()
        stored = self._open_task_of(entry)
        if stored is None:
            return effects
        if stored.task["metadata"].get(TaskMetadata.REASON) in WAITING_FOR_THE_HUB:
            set_status(stored.task, state_of(stored.task))  # the hub took it after all
            set_meta(stored.task, reason=None)
            self._store.save_task(stored)
            effects.publish(stored.task, [status_event(stored.task)])
        return effects

    def on_deferred(self, entry: OutboxEntry, error: HubError) -> Effects:
        """The hub cannot take a message of this task now: no room (``hub-storage-full``), its
        storage failing, or the hub away. It waits here and is sent again; the task says so
        (anet.reason hub_storage_full, or hub_unreachable) instead of waiting in silence."""
        effects = Effects()
        stored = self._open_task_of(entry)
        full = error.reason == "hub-storage-full"
        reason = Reason.HUB_STORAGE_FULL if full else Reason.HUB_UNREACHABLE
        if stored is None or stored.task["metadata"].get(TaskMetadata.REASON) == reason:
            return effects
        note = text_message(f"The hub did not take the message for now: "
                            f"{error.message.rstrip('.')}. It waits here and is sent again "
                            f"when the hub {'has room' if full else 'is back'}.",
                            role="ROLE_AGENT", context_id=stored.context_id, task_id=stored.id)
        set_status(stored.task, state_of(stored.task), message=note)
        set_meta(stored.task, reason=reason)
        self._store.save_task(stored)
        effects.publish(stored.task, [status_event(stored.task)])
        return effects

    def _finish_here(self, stored: StoredTask, state: TaskState, reason: Reason,
                     effect: EffectStatus, note: str | None, effects: Effects) -> None:
        task = stored.task
        message = None if note is None else text_message(
            note, role="ROLE_AGENT", context_id=stored.context_id, task_id=stored.id)
        set_status(task, state, message=message)
        set_meta(task, reason=reason, effect=effect)
        stored.state, stored.updated_at = state.value, time.time()
        self._store.drop_held_updates(stored.id)
        self._store.save_task(stored)
        effects.publish(task, [status_event(task)])
        kind = "task.canceled" if state is TaskState.TASK_STATE_CANCELED else "task.failed"
        effects.record(kind, taskId=stored.id, peer=stored.peer_aid, reason=reason.value,
                       effectStatus=effect.value)

    # --- helpers -----------------------------------------------------------------------------

    def _create(self, aid: str, message: dict[str, Any], context_id: str, skill: str | None,
                effects: Effects, metadata: dict[str, Any] | None = None, *,
                task_id: str | None = None, refused: TurnAnswer | None = None,
                blocking: bool = False) -> StoredTask:
        """A new task, its message queued for ``aid``; or, when a module's first turn held it
        (``refused.hold``), rejected here with that reason and status, nothing queued."""
        task_id = task_id or new_id()
        sent = message | {"contextId": context_id, "taskId": task_id}
        task: dict[str, Any] = {"id": task_id, "contextId": context_id, "history": [sent]}
        state = TaskState.TASK_STATE_SUBMITTED
        held = refused is not None and refused.hold is not None
        # A queued message leaves when it can, and the agent may act on it from then on: a
        # reader is never told ``none`` while it may be running (docs/mcp.md). Whether it left
        # is asked of the outbox only when the task ends here (_may_have_left).
        set_meta(task, state_seq=0, effect=EffectStatus.NONE if held else EffectStatus.POSSIBLE)
        if held:
            state = TaskState.TASK_STATE_REJECTED
            set_status(task, state, message=None if refused.status is None else refused.status | {
                "role": "ROLE_AGENT", "contextId": context_id, "taskId": task_id})
            set_meta(task, reason=refused.hold)
            for kind, data in refused.evidence:
                effects.record(kind, **data)
        else:
            set_status(task, state)
        now = time.time()
        stored = StoredTask(id=task_id, role=TaskRole.REQUESTER, peer_aid=aid,
                            context_id=context_id, state=state.value,
                            state_seq=0, skill=skill, task=task, receipt=None, served_by=None,
                            created_at=now, updated_at=now, last_heard_at=now)
        self._store.insert_task(stored)
        self._store.add_message(TaskRole.REQUESTER, aid, context_id, sent["messageId"], task_id)
        if state is TaskState.TASK_STATE_REJECTED:
            return stored
        self._queue(aid, wire_body(TaskMessage(task_id=task_id, context_id=context_id,
                                               message=sent, skill=skill,
                                               metadata=metadata or None,
                                               blocking=blocking or None)), task_id=task_id)
        effects.record("task.forwarded", taskId=task_id, peer=aid, contextId=context_id,
                       messageId=sent["messageId"])
        return stored

    def _continue(self, stored: StoredTask, message: dict[str, Any], effects: Effects,
                  metadata: dict[str, Any] | None = None, *,
                  blocking: bool = False) -> StoredTask:
        task = stored.task
        state = state_of(task)
        if state.is_terminal:
            raise TaskError("task-terminal", f"task {stored.id} is {state.word} "
                                             "and takes no more messages",
                            hint="send the message without taskId to start a new task")
        if not state.is_interrupted:
            raise TaskError("task-not-waiting", f"task {stored.id} is {state.word}"
                                                "; a message continues it only when it asks for "
                                                "input", hint="wait for the agent's question")
        sent = message | {"contextId": stored.context_id, "taskId": stored.id}
        add_to_history(task, sent)
        set_status(task, TaskState.TASK_STATE_SUBMITTED)
        set_meta(task, reason=None)
        stored.state = TaskState.TASK_STATE_SUBMITTED.value
        stored.updated_at = stored.last_heard_at = time.time()
        self._store.save_task(stored)
        self._store.add_message(TaskRole.REQUESTER, stored.peer_aid, stored.context_id,
                                sent["messageId"], stored.id)
        self._queue(stored.peer_aid, wire_body(TaskMessage(
            task_id=stored.id, context_id=stored.context_id, message=sent,
            metadata=metadata or None, blocking=blocking or None)), task_id=stored.id)
        effects.publish(task, [status_event(task)])
        effects.record("task.forwarded", taskId=stored.id, peer=stored.peer_aid,
                       contextId=stored.context_id, messageId=sent["messageId"])
        return stored

    def _repeat(self, aid: str, context_id: str, message_id: str) -> dict[str, Any] | None:
        task_id = self._store.message_task(TaskRole.REQUESTER, aid, context_id, message_id)
        return None if task_id is None else self._task_of(aid, task_id).task

    def _task_of(self, aid: str | None, task_id: str) -> StoredTask:
        stored = self._store.get_task(task_id, role=TaskRole.REQUESTER, peer_aid=aid)
        if stored is None:
            whose = f" sent to {aid}" if aid else ""
            raise TaskError("task-not-found", f"no task {task_id!r}{whose}",
                            hint="`anet tasks` lists the tasks this node sent")
        return stored

    def _check_remote(self, aid: str) -> None:
        check_aid(aid)
        if aid == self._aid:
            raise TaskError("unknown-agent", f"{aid} is this node itself, not a remote agent",
                            hint="`anet agents` lists the remote agents")

    async def _hub_away(self, aid: str) -> str | None:
        """None when the hub describes ``aid`` now; while it cannot (unreachable, or its
        storage down), the sentence that says why, for an agent this node :meth:`knows`:
        its message then waits in the outbox. Refused (:class:`TaskError`) before the node
        joined a hub or while the hub has not approved it, and for an agent it does not know."""
        status = self._hub.status
        if status.state in (JoinState.NOT_JOINED, JoinState.PENDING):
            raise TaskError("not-registered", status.sentence,
                            hint="`anet join <hub-url>` joins a hub; `anet status` shows the state")
        if status.state is JoinState.REGISTERED:
            try:
                await self._peer(aid)
                return None
            except TaskError as error:
                if error.reason != "hub-unavailable":
                    raise
                why = error.message
        else:
            why = status.sentence
        if not self.knows(aid):
            raise TaskError("hub-unavailable", f"{why.rstrip('.')}. This node has exchanged no "
                                               f"task with {aid} nor seen it in the directory "
                                               "lately, so it cannot tell that the agent "
                                               "exists.",
                            hint="send again once the hub answers (`anet status` shows the "
                                 "connection)")
        return why

    def _held_while_away(self, stored: StoredTask, why: str) -> None:
        """A new task whose message waits for the hub: it says so (``hub_unreachable``) until
        the hub takes the message (:meth:`on_accepted`)."""
        note = text_message(f"{why.rstrip('.')}. The message waits here and is sent when the "
                            "hub is back.",
                            role="ROLE_AGENT", context_id=stored.context_id, task_id=stored.id)
        set_status(stored.task, TaskState.TASK_STATE_SUBMITTED, message=note)
        set_meta(stored.task, reason=Reason.HUB_UNREACHABLE)
        self._store.save_task(stored)
        self._store.outbox_waited(stored.id, "hub-unreachable")

    async def _peer(self, aid: str) -> PeerInfo:
        try:
            return await self._hub.peer(aid)
        except HubError as error:
            if error.unknown_agent:
                raise TaskError("unknown-agent", f"no agent {aid} is known to the hub",
                                hint="check the AID with `anet agents`") from None
            if error.reason == "not-federated":
                raise TaskError("not-federated", error.message,
                                hint="the agent's home hub does not federate with yours: ask "
                                     "either operator to federate the two hubs") from None
            raise TaskError("hub-unavailable", f"the hub could not describe {aid}: "
                                               f"{error.message}",
                            hint="try again; `anet status` shows the hub connection") from None


def _effect_of(state: TaskState) -> EffectStatus:
    if state is TaskState.TASK_STATE_COMPLETED:
        return EffectStatus.DONE
    if state is TaskState.TASK_STATE_REJECTED:
        return EffectStatus.NONE
    return EffectStatus.POSSIBLE
