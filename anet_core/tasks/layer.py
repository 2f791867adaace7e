"""The task layer of a running node (``node.tasks``): both sides, the outbox and the loops."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from datetime import datetime
from typing import Any

from anet_core.evidence import EvidenceChain
from anet_core.identity import Identity, check_aid
from anet_core.link import HubLink, PeerInfo
from anet_core.metrics import NodeMetrics
from anet_core.protocol.tasks import Reason
from anet_core.store import Store
from anet_core.tasks.alive import KeepAlives
from anet_core.tasks.cards import ExtendedCards
from anet_core.tasks.common import Services, TaskError
from anet_core.tasks.events import TaskEvents, TaskSubscription
from anet_core.tasks.hooks import TaskHooks
from anet_core.tasks.inbound import InboundEnvelopes
from anet_core.tasks.local import LocalTasks
from anet_core.tasks.origin import LocalOrigin
from anet_core.tasks.outbox import Outbox
from anet_core.tasks.policy import (
    InboundPolicy,
    policy_in,
    policy_refused,
    vetoes,
)
from anet_core.tasks.provider import Provider
from anet_core.tasks.requester import Requester
from anet_core.wire import TaskState

log = logging.getLogger(__name__)

SEEN_PURGE_INTERVAL_S = 3600.0
MAX_SILENCE_CHECK_S = 30.0
STOP_TIMEOUT_S = 5.0


class TaskLayer:
    """Requester API (``send``, ``send_own``, ``get``, ``list``, ``cancel``, ``subscribe``,
    ``review``), the operator's provider API (``inbox``, ``received``, ``reply``, ``reject``),
    the inbound policy and the trust list. Callers use these methods only; the parts
    (``requester``, ``provider``, ``outbox``, ``inbound``) are the layer's own.

    Built by ``Node.open`` from the node's store, hub link, identity, evidence chain and the
    modules' hooks; :meth:`start` runs it, :meth:`stop` ends it.
    """

    def __init__(self, *, store: Store, hub: HubLink, identity: Identity, hooks: TaskHooks,
                 evidence: EvidenceChain, metrics: NodeMetrics, no_response_after: float) -> None:
        self._store = store
        self._hub = hub
        self._hooks = hooks
        self._no_response_after = no_response_after
        self.events = TaskEvents()
        self._background: set[asyncio.Task[None]] = set()
        self._services = Services(events=self.events, evidence=evidence, store=store,
                                  wake_outbox=lambda: self.outbox.wake(),
                                  start_background=self._start)
        self.requester = Requester(store=store, hub=hub, identity=identity, events=self.events,
                                   hooks=hooks, services=self._services)
        self.provider = Provider(store=store, hub=hub, identity=identity, hooks=hooks,
                                 metrics=metrics, services=self._services)
        self.alive = KeepAlives(store=store, hub=hub, identity=identity, metrics=metrics)
        self.outbox = Outbox(store=store, hub=hub, identity=identity,
                             on_refused=self.requester.on_refused,
                             on_accepted=self.requester.on_accepted,
                             on_deferred=self.requester.on_deferred, metrics=metrics,
                             services=self._services)
        self.cards = ExtendedCards(store=store, hub=hub, identity=identity,
                                   prices=hooks.card_prices)
        self.inbound = InboundEnvelopes(store=store, hub=hub, identity=identity,
                                        requester=self.requester, provider=self.provider,
                                        cards=self.cards,
                                        metrics=metrics, services=self._services)

    # --- requester API (see Requester for the rules) ----------------------------------------

    async def send(self, aid: str, message: dict[str, Any], *, skill: str | None = None,
                   metadata: dict[str, Any] | None = None,
                   blocking: bool = False) -> dict[str, Any]:
        return await self.requester.send(aid, message, skill=skill, metadata=metadata,
                                         blocking=blocking)

    async def send_own(self, task_id: str, message: dict[str, Any]) -> dict[str, Any]:
        """A module's own message on a requester task waiting for input (see
        Requester.send_own): e.g. the payment ``anet pay`` approved."""
        return await self.requester.send_own(task_id, message)

    def get(self, aid: str | None, task_id: str) -> dict[str, Any]:
        return self.requester.get(aid, task_id)

    def list(self, aid: str | None = None, *, context_id: str | None = None,
             state: TaskState | str | None = None, since: datetime | str | float | None = None,
             page_size: int = 50, page_token: str = "", history_length: int | None = None,
             include_artifacts: bool = False) -> dict[str, Any]:
        return self.requester.list(aid, context_id=context_id, state=state, since=since,
                                   page_size=page_size, page_token=page_token,
                                   history_length=history_length,
                                   include_artifacts=include_artifacts)

    def knows(self, aid: str) -> bool:
        return self.requester.knows(aid)

    async def cancel(self, aid: str | None, task_id: str) -> dict[str, Any]:
        return await self.requester.cancel(aid, task_id)

    def subscribe(self, aid: str | None, task_id: str) -> TaskSubscription:
        return self.requester.subscribe(aid, task_id)

    def peer_of(self, task_id: str) -> str:
        """The AID of the agent a task was sent to."""
        return self.requester.peer_of(task_id)

    async def agent(self, aid: str) -> PeerInfo:
        """The checked directory entry of the remote agent ``aid`` (see Requester.agent)."""
        return await self.requester.agent(aid)

    async def review(self, task_id: str, rating: int, text: str = "") -> dict[str, Any]:
        """Rate the agent that completed ``task_id`` at the hub, with its receipt as proof."""
        return await self.requester.review(task_id, rating, text)

    # --- provider API (the operator; see Provider for the rules) ----------------------------

    def inbox(self) -> list[dict[str, Any]]:
        """Tasks waiting for the operator, oldest first, with the requester's AID."""
        return self.provider.inbox()

    def received(self, task_id: str) -> dict[str, Any] | None:
        """A task this node received (in the inbox or not), with the requester's AID."""
        return self.provider.received(task_id)

    async def reply(self, task_id: str, text: str, *,
                    input_required: bool = False) -> dict[str, Any]:
        """Answer an inbox task as the operator (``input_required``: ask, keep it open)."""
        return await self.provider.reply(task_id, text, input_required=input_required)

    async def reject(self, task_id: str, reason: str | None = None) -> dict[str, Any]:
        """Refuse an inbox task; ``reason`` is shown to the requester."""
        return await self.provider.reject(task_id, reason)

    async def extended_card(self, aid: str) -> dict[str, Any]:
        """The extended card the agent ``aid`` signed for this node (docs/payments.md, "The
        extended card"): a signed document with its prices, checked. :class:`TaskError`
        ``card-refused`` when the agent does not give it, ``hub-unavailable`` when it cannot be
        asked now."""
        check_aid(aid)
        return await self.cards.fetch(aid)

    async def end_received(self, task_id: str, outcome: dict[str, Any]) -> None:
        """End a received task as a module's responder would (``EndingTask.outcome``: state,
        message, artifacts, reason, messageReply): a gate's module gives the end again that a
        stop interrupted (the end is offered to that gate first, as always). A task that has
        ended already is left as it is."""
        reason = outcome.get("reason")
        await self.provider.report(
            task_id, TaskState(outcome["state"]), message=outcome.get("message"), chunks=[],
            final_artifacts=list(outcome.get("artifacts") or []),
            reason=None if reason is None else Reason(reason),
            message_reply=bool(outcome.get("messageReply")))

    # --- tasks a module's own surface hands in (provider side, see tasks/local.py) ----------

    def local(self, origin: LocalOrigin) -> LocalTasks:
        """The tasks of one local caller, e.g. a token holder of the a2a module's published
        surface: sent into the provider pipeline like network tasks, answered by events."""
        return LocalTasks(origin, self.provider, self._store, self.events, self._services)

    # --- inbound policy and trust list -------------------------------------------------------

    @property
    def policy(self) -> InboundPolicy:
        return policy_in(self._store)

    def set_policy(self, policy: InboundPolicy | str) -> InboundPolicy:
        try:
            chosen = InboundPolicy(policy)
        except ValueError:
            raise TaskError("invalid-params", f"{policy!r} is not an inbound policy",
                            hint="use closed, trusted or open") from None
        refusals = vetoes(self._hooks.policy_vetoes, chosen)
        if refusals:
            raise policy_refused(chosen, refusals, hint=next(
                (veto.hint for veto in refusals if veto.hint), "keep the current policy"))
        with self._store.transaction():
            self._store.set_inbound_policy(chosen)
        log.info("event=policy-set policy=%s", chosen.value)
        return chosen

    def trust(self, aid: str) -> bool:
        with self._store.transaction():
            return self._store.trust(check_aid(aid))

    def distrust(self, aid: str) -> bool:
        with self._store.transaction():
            return self._store.distrust(check_aid(aid))

    def trusted(self) -> list[dict[str, Any]]:
        return [{"aid": aid, "addedAt": added_at} for aid, added_at in self._store.trusted()]

    # --- loops --------------------------------------------------------------------------------

    def refuse_vetoed_policy(self) -> None:
        """Raise when a module vetoes the inbound policy in force (its configuration changed
        while the node was down)."""
        refusals = vetoes(self._hooks.policy_vetoes, self.policy)
        if refusals:
            raise policy_refused(self.policy, refusals, hint=(
                "change what is named in config.json, or start without it, run `anet policy "
                "set trusted` and put it back"))

    def start(self, *, receive: bool = True, policy_checked: bool = False) -> None:
        """Recover what a stop interrupted, start the loops, and (unless ``receive`` is False:
        see :meth:`receive`) take envelopes from the hub. Refuses to start when a module vetoes
        the inbound policy in force (its configuration changed while the node was down), unless
        the caller asked already (``policy_checked``: the node does, before its hub link)."""
        if not policy_checked:
            self.refuse_vetoed_policy()
        self.provider.move_orphans_to_inbox()
        for loop in (self.outbox.run, self._watch_silence, self._forget_old_envelope_ids,
                     self.alive.run):
            self._start(loop)
        if receive:
            self.receive()

    def receive(self) -> None:
        """Take envelopes from the hub from now on. The daemon calls this once its modules have
        started, so that no task arrives before the module that would claim it is ready. The
        requester tasks waiting for input are offered to the modules again then."""
        self._hub.set_receiver(self.inbound, flush=self._store.flush)
        rechecks = self.provider.recheck_answers()
        self._start(lambda: self._services.run(rechecks))
        waiting = self.requester.turns.offer_waiting_tasks()
        self._start(lambda: self._services.run(waiting))

    async def stop(self) -> None:
        """Stop the loops and any module still serving a task (it resumes from the inbox)."""
        tasks = list(self._background)
        for task in tasks:
            task.cancel()
        if tasks:
            _, stuck = await asyncio.wait(tasks, timeout=STOP_TIMEOUT_S)
            for task in stuck:
                log.error("event=stop-timeout task=%s after=%.0fs", task.get_name(), STOP_TIMEOUT_S)

    def _start(self, work: Callable[[], Awaitable[None]]) -> None:
        task = asyncio.ensure_future(work())
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _watch_silence(self) -> None:
        after = self._no_response_after
        interval = max(0.05, min(after / 4, MAX_SILENCE_CHECK_S))
        while True:
            await asyncio.sleep(interval)
            try:
                await self._services.run(
                    await self.requester.fail_silent_tasks(after, time.time()))
            except Exception:
                log.exception("event=silence-check-failed")

    async def _forget_old_envelope_ids(self) -> None:
        while True:
            with self._store.transaction():
                forgotten = self._store.forget_expired_envelopes(time.time())
            if forgotten:
                log.debug("event=envelope-ids-forgotten count=%d", forgotten)
            await asyncio.sleep(SEEN_PURGE_INTERVAL_S)
