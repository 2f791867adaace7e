"""Incoming envelopes: open, check, persist, dispatch, in that order.

The hub acknowledges an envelope (and forgets it) when the receiver returns, so the receiver
returns only after the envelope's effect is committed, and raises only when trying again later
can help (the hub could not describe the sender). Every envelope that is refused is logged
with its id, its sender and the reason, and acknowledged: it can never become valid.
"""

from __future__ import annotations

import logging
from typing import Any

from pydantic import ValidationError

from anet_core.identity import Identity, VerifiedHistory
from anet_core.link import AckTiming, HubError, HubLink
from anet_core.metrics import NodeMetrics
from anet_core.protocol.envelope import (
    DEFAULT_MAX_AGE_S,
    MAX_FUTURE_SKEW_S,
    EnvelopeError,
    open_peeked,
    peek_header,
)
from anet_core.protocol.tasks import (
    TASK_BODY,
    CardReply,
    CardRequest,
    TaskAlive,
    TaskBody,
    TaskCancel,
    TaskMessage,
    TaskUpdate,
)
from anet_core.store import Store
from anet_core.tasks.cards import ExtendedCards
from anet_core.tasks.common import Effects, Services
from anet_core.tasks.provider import Provider
from anet_core.tasks.requester import Requester

log = logging.getLogger(__name__)

SEEN_ID_LIFETIME_S = DEFAULT_MAX_AGE_S + MAX_FUTURE_SKEW_S
"""An envelope id is remembered as long as the envelope could still be opened."""

KEY_ERRORS = frozenset({"unknown-key", "bad-signature"})
"""Envelope errors that a fresher key history of the sender may resolve."""


class InboundEnvelopes:
    """The node's receiver of envelopes from its hub (an ``EnvelopeReceiver``, see the
    module docstring): each is opened, checked and given to the requester or the provider."""

    def __init__(self, *, store: Store, hub: HubLink, identity: Identity, requester: Requester,
                 provider: Provider, cards: ExtendedCards, metrics: NodeMetrics,
                 services: Services) -> None:
        self._store = store
        self._metrics = metrics
        self._hub = hub
        self._identity = identity
        self._requester = requester
        self._provider = provider
        self._cards = cards
        self._services = services

    async def __call__(self, envelope: dict[str, Any]) -> AckTiming | None:
        """Take one envelope; return once what it changed is committed, and when its
        acknowledgement may go. The hub forgets it once the store's flush made that durable
        (the link calls :meth:`Store.flush` before it acknowledges: ``set_receiver`` in
        layer.py)."""
        return await self._receive(envelope)

    async def _receive(self, envelope: dict[str, Any]) -> AckTiming | None:
        self._metrics.envelopes_received.inc()
        try:
            header = peek_header(envelope)
        except EnvelopeError as error:
            self._refuse("?", "?", error.reason, str(error))
            return
        if header.recipient != self._identity.aid:
            self._refuse(header.id, header.sender, "misaddressed",
                         f"addressed to {header.recipient}")
            return
        if self._store.was_seen(header.id):
            self._refuse(header.id, header.sender, "replayed", "this envelope id was opened before")
            return
        try:
            peer = await self._hub.peer(header.sender)
        except HubError as error:
            if error.unknown_agent:
                self._refuse(header.id, header.sender, "unknown-sender", error.message)
                return
            raise  # the hub keeps the envelope and delivers it again
        history = peer.history
        if not isinstance(history, VerifiedHistory):
            self._refuse(header.id, header.sender, "unknown-key",
                         "the hub gave no verified key history for the sender")
            return
        try:
            opened = open_peeked(header, self._identity, history,
                                 keys=self._services.open_keys)
        except EnvelopeError as error:
            if error.reason not in KEY_ERRORS:
                self._refuse(header.id, header.sender, error.reason, str(error))
                return
            # The sender may have rotated since its history was cached: ask the hub once more.
            self._hub.forget_peer(header.sender)
            history = (await self._hub.peer(header.sender)).history
            try:
                if not isinstance(history, VerifiedHistory):
                    raise error
                opened = open_peeked(header, self._identity, history,
                                     keys=self._services.open_keys)
            except EnvelopeError as again:
                self._refuse(header.id, header.sender, again.reason, str(again))
                return
        try:
            body = TASK_BODY.validate_python(opened.body)
        except ValidationError as error:
            first = error.errors()[0]
            self._refuse(opened.id, opened.sender, "malformed-body",
                         f"{'.'.join(str(part) for part in first['loc'])}: {first['msg']}")
            with self._store.transaction(durable=False):
                self._store.mark_seen(opened.id, opened.sender,
                                      opened.ts / 1000 + SEEN_ID_LIFETIME_S)
            return
        with self._store.transaction(durable=False):
            if not self._store.mark_seen(opened.id, opened.sender,
                                         opened.ts / 1000 + SEEN_ID_LIFETIME_S):
                self._refuse(opened.id, opened.sender, "replayed", "opened meanwhile")
                return
            effects = self._dispatch(opened.sender, history, body, opened.ts / 1000)
            self._services.keep(effects)
        await self._services.run(effects)
        return _ack_timing(body)

    def _dispatch(self, sender: str, history: VerifiedHistory,
                  body: TaskMessage | TaskCancel | TaskUpdate | TaskAlive | CardRequest
                  | CardReply, sent_at: float) -> Effects:
        if isinstance(body, CardRequest):
            return self._cards.on_request(sender, body)
        if isinstance(body, CardReply):
            return self._cards.on_reply(sender, body)
        if isinstance(body, TaskAlive):
            return self._requester.on_alive(sender, body, sent_at)
        if isinstance(body, TaskMessage):
            return self._provider.on_message(sender, body)
        if isinstance(body, TaskCancel):
            return self._provider.on_cancel(sender, body)
        return self._requester.on_update(sender, history, body)

    @staticmethod
    def _refuse(envelope_id: str, sender: str, reason: str, detail: str) -> None:
        log.warning("event=envelope-refused id=%s from=%s reason=%s detail=%r", envelope_id, sender,
                    reason, detail)


def _ack_timing(body: TaskBody) -> AckTiming:
    """A task's update that does not end its turn may have the next one waiting behind it at
    the provider (an outbox sends a task's envelopes one after the other): acknowledged after
    a flush of its own. Nothing else has anything waiting for its acknowledgement, which waits
    for the next flush made anyway (``ACK_HOLD_S`` in link/delivery.py)."""
    if isinstance(body, TaskUpdate) and not (body.state.is_terminal or body.state.is_interrupted):
        return AckTiming.AT_ONCE
    return AckTiming.WITH_NEXT_FLUSH
