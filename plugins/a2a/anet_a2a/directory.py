"""``GET /a2a/v1/agents`` (the network's agents the node knows and the agents of direct peers),
the direct peers' agents in ``anet agents`` (``anet_directory_sources``) and the proxy card
routes."""

from __future__ import annotations

import time
from email.utils import formatdate
from typing import Any

from aiohttp import web

from anet_a2a.endpoint import CARD_MAX_AGE_S, ENDPOINT, Endpoint
from anet_a2a.peers.discovery import DirectAgent
from anet_a2a.peers.service import DIRECT_PEERS, DirectPeers
from anet_a2a.replies import json_reply, rest_error
from anet_a2a.state import MODULE
from anet_core.api import (
    QUERY_REFUSALS,
    DirectorySource,
    HubError,
    Node,
    SearchQuery,
    directory_listing,
    search_remote,
)
from anet_core.wire import A2AError, A2AErrorKind

MAX_LIMIT = 100
DEFAULT_LIMIT = 50
PAGE_FRESH_S = 5.0
"""The same list asked again within this long is answered from the last page, not the hub."""
PAGE_KEPT_S = 300.0
"""While the hub is busy or unreachable, a page this old is still answered (``anet.stale``)."""


def _limit(text: str | None) -> int:
    if text is None:
        return DEFAULT_LIMIT
    if not text.isdigit() or not 1 <= int(text) <= MAX_LIMIT:
        raise A2AError(A2AErrorKind.INVALID_PARAMS,
                       f"limit must be a whole number from 1 to {MAX_LIMIT}, got {text[:40]!r}")
    return int(text)


def _name(agent: DirectAgent) -> str:
    return str(agent.card.get("name") or agent.agent)


def direct_entry(endpoint: Endpoint, agent: DirectAgent) -> dict[str, Any]:
    """An agent of a direct peer: ``aid`` is its id here, ``<agent>@<peer>``."""
    urls = endpoint.urls(agent.id)
    return {"aid": agent.id, "url": urls.base, "cardUrl": urls.card, "name": _name(agent),
            "anet.directPeer": {"peer": agent.peer, "baseUrl": agent.base_url, "tls": agent.tls,
                                "signature": agent.signature.state.value}}


def directory_entry(agent: DirectAgent) -> dict[str, Any]:
    """An agent of a direct peer as ``anet agents`` lists it, with the URL the peer serves it
    at (the local endpoint's URL of it is ``GET /a2a/v1/agents``'s)."""
    skills = [skill for skill in agent.card.get("skills") or [] if isinstance(skill, dict)]
    return {"aid": agent.id, "name": _name(agent),
            "description": str(agent.card.get("description") or ""), "skills": skills,
            "directPeer": agent.peer, "url": agent.rpc_url, "tls": agent.tls,
            "signature": agent.signature.state.value}


def _matches(agent: DirectAgent, search: SearchQuery, peer_tags: list[str]) -> bool:
    """The search's filters on an agent of a direct peer: ``tag`` matches a tag of one of its
    skills or of the peer (``modules.a2a.peers[].tags``)."""
    skills = [skill for skill in agent.card.get("skills") or [] if isinstance(skill, dict)]
    if search.skill and all(skill.get("id") != search.skill for skill in skills):
        return False
    if search.tag and search.tag not in peer_tags and all(
            search.tag not in (skill.get("tags") or []) for skill in skills):
        return False
    text = f"{agent.id} {agent.card.get('name', '')} {agent.card.get('description', '')}"
    return not search.q or search.q.lower() in text.lower()


def matching(peers: DirectPeers | None, search: SearchQuery) -> list[DirectAgent]:
    """The direct peers' agents that match the search's filters, as last read."""
    return [] if peers is None else [agent for agent in peers.agents.values()
                                     if _matches(agent, search, peers.peers[agent.peer].tags)]


def directory_source(node: Node) -> DirectorySource:
    async def listed(search: SearchQuery) -> list[dict[str, Any]]:
        return [directory_entry(agent) for agent in matching(node.get(DIRECT_PEERS), search)]

    return DirectorySource(module=MODULE, list=listed)


async def list_agents(request: web.Request) -> web.StreamResponse:
    endpoint = request.config_dict[ENDPOINT]
    query = request.query
    try:
        search = SearchQuery(skill=query.get("skill") or None, tag=query.get("tag") or None,
                             q=query.get("q") or None, cursor=query.get("cursor") or None,
                             limit=_limit(query.get("limit")))
    except A2AError as error:
        return rest_error(error)
    peers = endpoint.node.get(DIRECT_PEERS)
    # Direct peers come first, on the first page only: they are few and need no hub.
    direct = [] if search.cursor else [direct_entry(endpoint, agent)
                                       for agent in matching(peers, search)]
    now = time.monotonic()
    kept = endpoint.pages.get(search)
    stale = False
    if kept is not None and now - kept.at < PAGE_FRESH_S:
        page = kept.page  # a client asking again at once costs the hub nothing
    else:
        try:
            page = await search_remote(endpoint.node.hub, search, endpoint.node.aid)
        except HubError as error:
            if error.reason in QUERY_REFUSALS:
                return rest_error(A2AError(A2AErrorKind.INVALID_PARAMS, error.message))
            if kept is None or now - kept.at > PAGE_KEPT_S:
                if peers is None:
                    return rest_error(A2AError(
                        A2AErrorKind.INTERNAL_ERROR,
                        f"The directory cannot be searched now: {error.message}"), status=503)
                return json_reply({"agents": direct, "hubError": error.message,
                                   "anet.hub": hub_link(endpoint)})
            page, stale = kept.page, True  # the hub is busy or away: the last answer
        else:
            endpoint.pages.put(search, page, now)
    # The anet listing, with the URLs an A2A client resolves the agent's card from.
    agents = [{"aid": item["aid"], "url": endpoint.urls(item["aid"]).base,
               "cardUrl": endpoint.urls(item["aid"]).card} | item
              for item in directory_listing(page.peers, own_aid=endpoint.node.aid)]
    body: dict[str, Any] = {"agents": direct + agents, "anet.hub": hub_link(endpoint)}
    if page.next_cursor:
        body["nextCursor"] = page.next_cursor
    if stale:
        body["anet.stale"] = True
    return json_reply(body)


def hub_link(endpoint: Endpoint) -> dict[str, Any]:
    """The node's link to its hub, as `anet status` shows it: a client of the list sees at once
    why tasks wait (``unreachable``) or why the list is short."""
    return endpoint.node.hub.status.as_dict()


async def agent_card(request: web.Request) -> web.StreamResponse:
    """The signed proxy card, with validators so clients may cache it."""
    endpoint = request.config_dict[ENDPOINT]
    try:
        card, version = await endpoint.card(await endpoint.target(request))
    except A2AError as error:
        return rest_error(error)
    headers = {"Cache-Control": f"private, max-age={CARD_MAX_AGE_S}", "ETag": version.etag,
               "Last-Modified": formatdate(version.last_modified, usegmt=True)}
    if version.etag in request.headers.get("If-None-Match", ""):
        return web.Response(status=304, headers=headers)
    return json_reply(card.wire(), headers=headers)
