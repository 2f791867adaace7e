"""``GET /a2a/v1/agents`` (the remote agents the node knows) and the proxy card routes."""

from __future__ import annotations

from email.utils import formatdate
from typing import Any

from aiohttp import web

from anet_a2a.endpoint import CARD_MAX_AGE_S, ENDPOINT
from anet_a2a.replies import json_reply, rest_error
from anet_core.api import HubError, SearchQuery, directory_listing
from anet_core.wire import A2AError, A2AErrorKind

MAX_LIMIT = 100
DEFAULT_LIMIT = 50


def _limit(text: str | None) -> int:
    if text is None:
        return DEFAULT_LIMIT
    if not text.isdigit() or not 1 <= int(text) <= MAX_LIMIT:
        raise A2AError(A2AErrorKind.INVALID_PARAMS,
                       f"limit must be a whole number from 1 to {MAX_LIMIT}, got {text[:40]!r}")
    return int(text)


async def list_agents(request: web.Request) -> web.StreamResponse:
    endpoint = request.config_dict[ENDPOINT]
    query = request.query
    try:
        search = SearchQuery(skill=query.get("skill") or None, tag=query.get("tag") or None,
                             q=query.get("q") or None, cursor=query.get("cursor") or None,
                             limit=_limit(query.get("limit")))
    except A2AError as error:
        return rest_error(error)
    try:
        page = await endpoint.node.hub.search(search)
    except HubError as error:
        return rest_error(A2AError(A2AErrorKind.INTERNAL_ERROR,
                                   f"The directory cannot be searched now: {error.message}"),
                          status=503)
    # The anet listing, with the URLs an A2A client resolves the agent's card from.
    agents = [{"aid": item["aid"], "url": endpoint.urls(item["aid"]).base,
               "cardUrl": endpoint.urls(item["aid"]).card} | item
              for item in directory_listing(page.peers, own_aid=endpoint.node.aid)]
    body: dict[str, Any] = {"agents": agents}
    if page.next_cursor:
        body["nextCursor"] = page.next_cursor
    return json_reply(body)


async def agent_card(request: web.Request) -> web.StreamResponse:
    """The signed proxy card, with validators so clients may cache it."""
    endpoint = request.config_dict[ENDPOINT]
    try:
        card, version = await endpoint.card(endpoint.agent(request))
    except A2AError as error:
        return rest_error(error)
    headers = {"Cache-Control": f"private, max-age={CARD_MAX_AGE_S}", "ETag": version.etag,
               "Last-Modified": formatdate(version.last_modified, usegmt=True)}
    if version.etag in request.headers.get("If-None-Match", ""):
        return web.Response(status=304, headers=headers)
    return json_reply(card.wire(), headers=headers)
