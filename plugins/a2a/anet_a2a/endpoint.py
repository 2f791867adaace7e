"""The state of the running interface: the node, the listener's port, the token, the cards."""

from __future__ import annotations

import hashlib
import time
from dataclasses import dataclass, field

from aiohttp import web

from anet_a2a.card import AgentUrls, proxy_card, signed
from anet_a2a.jws import canonical_card
from anet_a2a.operations import AgentOperations
from anet_a2a.replies import no_such_agent
from anet_a2a.tasks_port import AgentTasks
from anet_core.api import HubError, KeyState, Node, PeerInfo, TokenFile, Verification, is_aid
from anet_core.wire import AgentCard

EXTENSIONS_HEADER = "A2A-Extensions"
CARD_MAX_AGE_S = 60


@dataclass(frozen=True)
class CardVersion:
    etag: str
    last_modified: float


@dataclass
class Endpoint:
    """One per listener. ``card_versions`` remembers when each agent's card last changed, so
    Last-Modified moves only when the ETag does."""

    node: Node
    port: int
    token: TokenFile
    card_versions: dict[str, CardVersion] = field(default_factory=dict)

    def urls(self, aid: str) -> AgentUrls:
        return AgentUrls.of(self.port, aid)

    def agent(self, request: web.Request) -> str:
        """The AID of the path; an invalid AID, or this node's own, is no agent here."""
        aid = request.match_info["aid"]
        if not is_aid(aid) or aid == self.node.aid:
            raise no_such_agent(aid)
        return aid

    def operations(self, request: web.Request, aid: str) -> AgentOperations:
        requested = frozenset(uri.strip() for line in request.headers.getall(EXTENSIONS_HEADER, [])
                              for uri in line.split(",") if uri.strip())
        return AgentOperations(tasks=AgentTasks(aid, self.node.tasks), extensions=requested)

    async def peer(self, aid: str) -> PeerInfo:
        try:
            return await self.node.hub.peer(aid)
        except HubError as error:
            if error.unknown_agent:
                raise no_such_agent(aid) from None
            # The directory cannot be asked now: nothing the agent said can be checked, so
            # the card is the placeholder made from the AID.
            return PeerInfo(aid=aid, verification=Verification.UNVERIFIED,
                            key_state=KeyState.STALE)

    async def card(self, aid: str) -> tuple[AgentCard, CardVersion]:
        """The signed proxy card of ``aid`` and its cache validators."""
        peer = await self.peer(aid)
        extensions = self.node.plugins.collect("anet_card_extensions", node=self.node, peer=peer)
        card = proxy_card(peer, self.urls(aid), extensions)
        etag = 'W/"' + hashlib.sha256(canonical_card(card.wire())).hexdigest()[:32] + '"'
        version = self.card_versions.get(aid)
        if version is None or version.etag != etag:
            version = self.card_versions[aid] = CardVersion(etag, time.time())
        return signed(card, self.node.identity), version


ENDPOINT = web.AppKey("a2a-endpoint", Endpoint)

