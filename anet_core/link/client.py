"""The node's link to its home hub: :class:`HubClient` implements ``anet_core.link.HubLink``.

It puts the link's parts together: the connection (``connection``: the WebSocket, handshake,
hub pin, reconnection, paced requests), the deliveries (``delivery``: envelopes handed to the
receiver and acknowledged once kept), the directory (``directory``: verified, briefly kept
lookups) and the card (``card``: published at every registration, refreshed when the modules'
skills change). :func:`node_hub_client` builds the one a node runs with (``Node.open``) and
:func:`open_hub_link` runs it.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anet_core.identity import Identity, sign_document
from anet_core.link.card import (
    CardContent,
    CardPublisher,
    Skills,
    card_from_config,
    module_skills,
    priced_skills,
    refresh_card_forever,
)
from anet_core.link.connection import HEARTBEAT_S, Channel, HubConnection, normalize_hub_url
from anet_core.link.contract import (
    EnvelopeReceiver,
    Flush,
    HubError,
    JoinState,
    JoinStatus,
    PeerInfo,
    SearchPage,
    SearchQuery,
)
from anet_core.link.delivery import Delivery
from anet_core.link.directory import Directory
from anet_core.protocol.documents import REVIEW_TYPE
from anet_core.protocol.frames import AcceptedFrame
from anet_core.util.canonical import compact_json

if TYPE_CHECKING:
    from anet_core.config import Config
    from anet_core.records import SkillSource
    from anet_core.settings import DataPaths

SEND_FRAME_OVERHEAD = 32
"""Bytes a ``send`` frame adds to the envelope beyond ``{"type":"send","envelope":…}`` (the
``rid``), counted against the hub's ``maxEnvelopeBytes``."""


class HubClient:
    """A node's link to its home hub (``anet_core.link.HubLink``)."""

    def __init__(self, identity: Identity, *, url: str | None, pin_path: Path,
                 card: CardContent | None = None,
                 module_skills: Callable[[], Awaitable[Skills]] | None = None,
                 priced: Callable[[], frozenset[str]] | None = None,
                 heartbeat_s: float = HEARTBEAT_S, instances: Sequence[str] = ()) -> None:
        self._identity = identity
        self._connection = HubConnection(identity, url=url, pin_path=pin_path,
                                         on_open=self._opened, on_registered=self._registered,
                                         heartbeat_s=heartbeat_s, instances=instances)
        self._directory = Directory(self._connection.request,
                                    lambda: self._connection.hub_history)
        self._delivery = Delivery(on_failure=self._directory.forget)
        self._card = None if card is None else CardPublisher(
            identity, card, request=self._connection.request, module_skills=module_skills,
            priced=priced)

    @property
    def status(self) -> JoinStatus:
        return self._connection.status

    @property
    def url(self) -> str | None:
        return self._connection.url

    def set_receiver(self, receiver: EnvelopeReceiver, *, flush: Flush | None = None) -> None:
        self._delivery.set_receiver(receiver, flush=flush)

    async def send(self, envelope: dict[str, Any] | str) -> None:
        self._connection.require_registered()
        # The outbox hands over the text it stored with the sealed envelope: sent as it is.
        body = envelope if isinstance(envelope, str) else compact_json(envelope)
        text = f'{{"type":"send","envelope":{body}}}'
        limits = self._connection.limits
        if limits is not None:
            size = len(text) + SEND_FRAME_OVERHEAD
            if size > limits.max_envelope_bytes:
                raise HubError("envelope-too-large",
                               f"the envelope is {size} bytes; the hub at {self.url} accepts at "
                               f"most {limits.max_envelope_bytes} bytes per envelope")
        answer = await self._connection.request({"type": "send"}, text=text)
        if not isinstance(answer, AcceptedFrame):
            raise HubError("hub-protocol", f"the hub answered {answer.type} to send")

    async def peer(self, aid: str) -> PeerInfo:
        self._connection.require_registered()
        return await self._directory.peer(aid)

    def cached_peer(self, aid: str) -> PeerInfo | None:
        return self._directory.cached(aid)

    async def search(self, query: SearchQuery) -> SearchPage:
        self._connection.require_registered()
        return await self._directory.search(query)

    def forget_peer(self, aid: str | None = None) -> None:
        self._directory.forget(aid)

    async def refresh_card(self) -> None:
        url = self._connection.url
        if self._card is None or url is None or self.status.state is not JoinState.REGISTERED:
            return  # the card is published at the next registration anyway
        await self._card.refresh(url)

    async def reregister(self) -> None:
        urls = self._connection.urls
        await self.rejoin(urls[0] if urls else None, urls[1:])

    async def rejoin(self, url: str | None, instances: Sequence[str] = ()) -> JoinStatus:
        for each in (url, *instances):  # a bad URL leaves the link be
            if each:
                normalize_hub_url(each)
        await self._connection.stop()
        self._directory.forget()
        self._connection.retarget(url, instances)
        await self._connection.start()
        return self.status

    async def post_review(self, review: dict[str, Any]) -> None:
        self._connection.require_registered()
        signed = sign_document(self._identity, {"type": REVIEW_TYPE, **review,
                                                "createdAt": int(time.time())})
        await self._connection.request({"type": "review", "review": signed})

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect in the background; wait briefly for the first attempt's outcome."""
        await self._connection.start()

    async def close(self) -> None:
        await self._connection.stop()
        await self._directory.close()
        await self._connection.close()

    def _opened(self, channel: Channel) -> None:
        self._directory.forget()  # a new connection: what the directory says is asked afresh
        self._delivery.attach(channel)

    def _registered(self, channel: Channel) -> None:
        url = self._connection.url
        if self._card is not None and url is not None:
            # On the channel: the answer to publish arrives through the read loop this runs in.
            channel.spawn(self._card.publish(url), name="card-publish")


def node_hub_client(identity: Identity, config: Config, paths: DataPaths,
                    skill_sources: Callable[[], list[SkillSource]]) -> HubClient:
    """The node's hub link as config.json says (``hub``, ``node``), its card also offering the
    modules' skills (``skill_sources``: ``anet_card_skills``); :func:`open_hub_link` runs it."""
    return HubClient(identity, url=config.hub.url, pin_path=paths.hub_pin,
                     card=card_from_config(config.node),
                     module_skills=partial(module_skills, skill_sources),
                     priced=partial(priced_skills, skill_sources),
                     heartbeat_s=config.hub.heartbeat.total_seconds(),
                     instances=config.hub.instances)


@asynccontextmanager
async def open_hub_link(client: HubClient) -> AsyncIterator[HubClient]:
    """``client`` connected in the background while the context is open, then closed."""
    await client.start()
    refresher = asyncio.create_task(refresh_card_forever(client.refresh_card),
                                    name="card-refresh")
    try:
        yield client
    finally:
        refresher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await refresher
        await client.close()
