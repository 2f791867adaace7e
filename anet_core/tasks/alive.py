"""The provider side's keep-alives: while a task waits here (in the inbox, or at a module), a
``task.alive`` tells its requester that it is not forgotten (docs/protocol.md), so that it does
not fail there through ``no_response_after`` merely because it waits. The requester side takes
them in ``Requester.on_alive``."""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict

from anet_core.identity import Identity
from anet_core.link import HubError, HubLink, JoinState
from anet_core.metrics import NodeMetrics
from anet_core.protocol.envelope import seal
from anet_core.protocol.tasks import MAX_ALIVE_TASKS, AliveTask, TaskAlive, wire_body
from anet_core.store import Store, TaskRole
from anet_core.tasks.origin import is_local_peer
from anet_core.wire import ACTIVE_TASK_STATES

log = logging.getLogger(__name__)

ALIVE_INTERVAL_S = 300.0
"""How often each requester is told which of its tasks are still open here (``task.alive``);
well below the default ``no_response_after`` of 15 minutes."""


class KeepAlives:
    """Tells each requester, every :data:`ALIVE_INTERVAL_S`, which of its tasks are open here."""

    def __init__(self, *, store: Store, hub: HubLink, identity: Identity,
                 metrics: NodeMetrics) -> None:
        self._store = store
        self._hub = hub
        self._identity = identity
        self._metrics = metrics

    async def run(self) -> None:
        """Send the keep-alives every :data:`ALIVE_INTERVAL_S` until cancelled."""
        while True:
            await asyncio.sleep(ALIVE_INTERVAL_S)
            try:
                await self.send()
            except Exception:
                log.exception("event=keep-alive-failed")

    async def send(self) -> int:
        """One ``task.alive`` per requester (per :data:`MAX_ALIVE_TASKS` tasks) naming its tasks
        in SUBMITTED or WORKING here. Best effort: sealed and handed to the hub directly, never
        queued or retried (the next interval sends again) and never stored here. Returns the
        number of envelopes sent."""
        hub = self._hub
        if hub.status.state is not JoinState.REGISTERED:
            return 0
        open_tasks: defaultdict[str, list[AliveTask]] = defaultdict(list)
        for stored in self._store.tasks_in_states(TaskRole.PROVIDER, ACTIVE_TASK_STATES):
            if is_local_peer(stored.peer_aid):
                continue  # a local caller follows its task by subscription
            open_tasks[stored.peer_aid].append(AliveTask(task_id=stored.id,
                                                         context_id=stored.context_id))
        sent = 0
        for peer_aid, tasks in open_tasks.items():
            try:
                peer = await hub.peer(peer_aid)
                if not peer.encryption_key:
                    continue
                for start in range(0, len(tasks), MAX_ALIVE_TASKS):
                    body = wire_body(TaskAlive(tasks=tasks[start:start + MAX_ALIVE_TASKS]))
                    await hub.send(seal(self._identity, peer_aid, peer.encryption_key, body))
                    self._metrics.envelopes_sent.inc()
                    sent += 1
            except (HubError, ValueError) as error:
                log.info("event=keep-alive-skipped to=%s error=%r", peer_aid,
                         getattr(error, "message", error))
        if sent:
            log.debug("event=keep-alive-sent envelopes=%d requesters=%d", sent, len(open_tasks))
        return sent
