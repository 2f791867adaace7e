"""The state of the running interface: the node, the listener's port, the token, the cards."""

from __future__ import annotations

import hashlib
import logging
import time
from collections import OrderedDict
from dataclasses import dataclass, field

from aiohttp import web

from anet_a2a.card import (
    PREVIEW_EXTENSION,
    AgentUrls,
    direct_proxy_card,
    proxy_card,
    signed,
    with_prices,
)
from anet_a2a.jws import canonical_card
from anet_a2a.operations import AgentOperations
from anet_a2a.peers.discovery import DirectAgent, is_direct_id
from anet_a2a.peers.service import DIRECT_PEERS
from anet_a2a.replies import no_such_agent
from anet_a2a.tasks_port import AgentTasks, TasksPort
from anet_core.api import (
    CardExtension,
    HubError,
    KeyState,
    Node,
    PeerInfo,
    SearchPage,
    SearchQuery,
    TaskError,
    TokenFile,
    Verification,
    is_aid,
)
from anet_core.wire import AgentCard

log = logging.getLogger(__name__)

EXTENSIONS_HEADER = "A2A-Extensions"
LEGACY_EXTENSIONS_HEADER = "X-A2A-Extensions"
"""The spelling of A2A 0.3 and of the a2a-x402 specifications; read, and answered, alike."""
CARD_MAX_AGE_S = 60

Target = str | DirectAgent
"""The agent of a request: a network agent's AID, or an agent of a direct peer."""


def requested_extensions(request: web.Request) -> frozenset[str]:
    """The extension URIs the client requested, in either header spelling."""
    return frozenset(uri.strip() for header in (EXTENSIONS_HEADER, LEGACY_EXTENSIONS_HEADER)
                     for line in request.headers.getall(header, [])
                     for uri in line.split(",") if uri.strip())


ACTIVATED = web.RequestKey("a2a-activated-extensions", frozenset)
"""The requested extension URIs this request activated, named in the answer's header."""


def activate(request: web.Request, declared: list[CardExtension]) -> frozenset[str]:
    """The requested URIs that name the preview extension or one ``declared`` (its ``uri`` or
    one of its ``also_activated_by``), as the client spelled them; kept for the answer."""
    known = {PREVIEW_EXTENSION}
    for extension in declared:
        known |= {extension.uri, *extension.also_activated_by}
    activated = requested_extensions(request) & known
    request[ACTIVATED] = activated
    return activated


async def name_activated(request: web.Request, response: web.StreamResponse) -> None:
    """``on_response_prepare``: the answer names what the request activated, in the header
    spelling the client used (streams included: they prepare before their first event)."""
    activated = request.get(ACTIVATED)
    if not activated:
        return
    for header in (EXTENSIONS_HEADER, LEGACY_EXTENSIONS_HEADER):
        if header in request.headers:
            response.headers[header] = ", ".join(sorted(activated))


@dataclass(frozen=True)
class CardVersion:
    etag: str
    last_modified: float


@dataclass(frozen=True)
class KeptPage:
    page: SearchPage
    at: float
    """``time.monotonic()`` when the hub gave it."""


@dataclass
class PageCache:
    """The last directory page of each list query, at most ``size`` queries (least recently
    stored first out), so repeated lists cost the hub nothing and a busy hub is no outage."""

    size: int = 256
    _pages: OrderedDict[SearchQuery, KeptPage] = field(default_factory=OrderedDict)

    def get(self, query: SearchQuery) -> KeptPage | None:
        return self._pages.get(query)

    def put(self, query: SearchQuery, page: SearchPage, at: float) -> None:
        self._pages.pop(query, None)
        self._pages[query] = KeptPage(page, at)
        while len(self._pages) > self.size:
            self._pages.popitem(last=False)


@dataclass
class Endpoint:
    """One per listener (the local endpoint's :class:`~anet_a2a.surface.Surface`).
    ``card_versions`` remembers when each agent's card last changed, so Last-Modified moves
    only when the ETag does."""

    node: Node
    port: int
    token: TokenFile
    card_versions: dict[str, CardVersion] = field(default_factory=dict)
    rejected_status: int = 200
    push_refusal: str = ("Push notifications are not supported: the local endpoint cannot "
                         "reach a client that is not connected")
    pages: PageCache = field(default_factory=PageCache)

    def urls(self, agent_id: str) -> AgentUrls:
        return AgentUrls.of(self.port, agent_id)

    async def target(self, request: web.Request) -> Target:
        """The agent of the path: an AID (not this node's own), or ``<agent>@<peer>`` of a
        direct peer; anything else is no agent here."""
        agent_id = request.match_info["aid"]
        if is_direct_id(agent_id):
            peers = self.node.get(DIRECT_PEERS)
            direct = None if peers is None else await peers.agent(agent_id)
            if direct is None:
                raise no_such_agent(agent_id)
            return direct
        if not is_aid(agent_id) or agent_id == self.node.aid:
            raise no_such_agent(agent_id)
        # An AID neither this node's tasks nor the directory know is "no such agent" on every
        # route alike; a directory that cannot be asked now does not make an agent unknown.
        if self.node.tasks.knows(agent_id):  # whatever the directory says now
            return agent_id
        try:
            await self.node.hub.peer(agent_id)
        except HubError as error:
            if error.unknown_agent:
                raise no_such_agent(agent_id) from None
        return agent_id

    def port_of(self, target: Target) -> TasksPort:
        if isinstance(target, DirectAgent):
            peers = self.node[DIRECT_PEERS]
            return peers.port(target)
        return AgentTasks(target, self.node.tasks, self.peer)

    async def operations(self, request: web.Request) -> AgentOperations:
        target = await self.target(request)
        declared: list[CardExtension] = []
        if isinstance(target, str) and requested_extensions(request) - {PREVIEW_EXTENSION}:
            declared = await self.extensions_of(target)
        return AgentOperations(tasks=self.port_of(target),
                               extensions=activate(request, declared))

    async def extensions_of(self, aid: str) -> list[CardExtension]:
        """What the modules declare on the proxy card of ``aid`` now (``anet_card_extensions``)."""
        peer = await self.peer(aid)
        extensions: list[CardExtension] = self.node.plugins.collect(
            "anet_card_extensions", node=self.node, peer=peer)
        return extensions

    async def extended_card(self, request: web.Request) -> AgentCard:
        """The proxy card, with the prices of the agent's extended card when the agent gives
        this node one (docs/payments.md, "The extended card")."""
        target = await self.target(request)
        card, _ = await self.card(target)
        if isinstance(target, DirectAgent):
            return card
        try:
            extended = await self.node.tasks.extended_card(target)
        except TaskError as error:
            log.info("event=extended-card-not-given aid=%s reason=%s", target, error.reason)
            return card
        return signed(with_prices(card, extended), self.node.identity)

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

    async def card(self, target: Target) -> tuple[AgentCard, CardVersion]:
        """The signed proxy card of ``target`` and its cache validators."""
        if isinstance(target, DirectAgent):
            aid = target.id
            card = direct_proxy_card(target, self.urls(aid))
        else:
            aid = target
            peer = await self.peer(aid)
            extensions = self.node.plugins.collect("anet_card_extensions", node=self.node,
                                                   peer=peer)
            card = proxy_card(peer, self.urls(aid), extensions)
        etag = 'W/"' + hashlib.sha256(canonical_card(card.wire())).hexdigest()[:32] + '"'
        version = self.card_versions.get(aid)
        if version is None or version.etag != etag:
            version = self.card_versions[aid] = CardVersion(etag, time.time())
        return signed(card, self.node.identity), version


ENDPOINT = web.AppKey("a2a-endpoint", Endpoint)

