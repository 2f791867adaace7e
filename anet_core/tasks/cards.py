"""Extended cards between nodes: what an agent tells one requester beyond its network card (the
prices of its skills), asked for and answered over the hub (``card.request``, ``card.reply``;
docs/payments.md, "The extended card").

The agent gives it to anyone when it charges for a skill, otherwise only to a requester on its
trust list. The answer is a document signed by the agent for that requester, sent directly
(never queued: the requester asks again if it wants it).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable
from typing import Any

from anet_core.identity import Identity, sign_document
from anet_core.link import HubError, HubLink
from anet_core.protocol.documents import (
    EXTENDED_CARD_TYPE,
    DirectoryDocError,
    ExtendedCard,
    checked_content,
)
from anet_core.protocol.envelope import seal
from anet_core.protocol.tasks import CardReply, CardRequest, wire_body
from anet_core.store import Store
from anet_core.tasks.common import Effects, TaskError, new_id

log = logging.getLogger(__name__)

CARD_REPLY_TIMEOUT_S = 5.0
NOT_GIVEN = "This agent charges nothing and gives its extended card to agents it trusts only."


class ExtendedCards:
    def __init__(self, *, store: Store, hub: HubLink, identity: Identity,
                 prices: Callable[[], dict[str, dict[str, Any]]]) -> None:
        self._store = store
        self._hub = hub
        self._identity = identity
        self._prices = prices
        self._waiting: dict[str, tuple[str, asyncio.Future[CardReply]]] = {}

    # --- the agent's side ---------------------------------------------------------------------

    def on_request(self, sender: str, body: CardRequest) -> Effects:
        effects = Effects()
        prices = self._prices()
        if prices or self._store.is_trusted(sender):
            card = sign_document(self._identity, {
                "type": EXTENDED_CARD_TYPE, "agent": self._identity.aid, "requester": sender,
                "prices": prices, "issuedAt": int(time.time())})
            reply = CardReply(request_id=body.request_id, card=card)
        else:
            reply = CardReply(request_id=body.request_id, refusal=NOT_GIVEN)
        log.info("event=extended-card-asked from=%s given=%s", sender, reply.card is not None)

        async def send() -> None:
            try:
                await self._send(sender, reply)
            except (HubError, ValueError) as error:
                log.info("event=extended-card-unsent to=%s error=%r", sender,
                         getattr(error, "message", error))

        effects.background.append(send)
        return effects

    # --- the requester's side -----------------------------------------------------------------

    def on_reply(self, sender: str, body: CardReply) -> Effects:
        waiting = self._waiting.get(body.request_id)
        if waiting is None or waiting[0] != sender or waiting[1].done():
            log.info("event=extended-card-unexpected from=%s", sender)
        else:
            waiting[1].set_result(body)
        return Effects()

    async def fetch(self, aid: str) -> dict[str, Any]:
        """The extended card ``aid`` signed for this node (the signed document), checked;
        :class:`TaskError` ``card-refused`` when the agent does not give it, ``hub-unavailable``
        when it cannot be asked or does not answer in time."""
        request_id = new_id()
        future: asyncio.Future[CardReply] = asyncio.get_running_loop().create_future()
        self._waiting[request_id] = (aid, future)
        try:
            await self._send(aid, CardRequest(request_id=request_id))
            reply = await asyncio.wait_for(future, CARD_REPLY_TIMEOUT_S)
        except (HubError, ValueError, TimeoutError) as error:
            raise TaskError("hub-unavailable", f"the extended card of {aid} could not be asked "
                                               f"for: {getattr(error, 'message', None) or error!r}"
                            ) from None
        finally:
            self._waiting.pop(request_id, None)
        if reply.card is None:
            raise TaskError("card-refused", reply.refusal or f"{aid} gives no extended card")
        try:
            peer = await self._hub.peer(aid)
            if peer.history is None:
                raise DirectoryDocError("extended-card-unknown-key", "no key history")
            card = checked_content(ExtendedCard, reply.card, peer.history, what="extended-card",
                                   current_key=False)
        except (HubError, DirectoryDocError) as error:
            raise TaskError("card-refused", error.message) from None
        if card.agent != aid or card.requester != self._identity.aid:
            raise TaskError("card-refused", f"the extended card of {aid} is for {card.requester}"
                                            f" from {card.agent}")
        return reply.card

    async def _send(self, aid: str, body: CardRequest | CardReply) -> None:
        peer = await self._hub.peer(aid)
        if not peer.encryption_key:
            raise ValueError(f"{aid} has no encryption key in the directory")
        await self._hub.send(seal(self._identity, aid, peer.encryption_key, wire_body(body)))
