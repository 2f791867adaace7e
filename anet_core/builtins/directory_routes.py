"""The control routes of the directory commands (anet_core.builtins.directory_cli):
``/tasks/agents``, ``/tasks/agents/<aid>`` and ``/tasks/review``."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web
from pydantic import Field

from anet_core.control.parsing import RequestBody, query_number, read_body
from anet_core.errors import AnetError
from anet_core.link import (
    QUERY_REFUSALS,
    HubError,
    SearchQuery,
    Verification,
    directory_listing,
    search_remote,
)
from anet_core.node import NODE_KEY
from anet_core.records import DirectorySource

log = logging.getLogger(__name__)

DIRECTORY_SOURCE_TIMEOUT_S = 5.0
"""How long the listing waits for one module's agents (``anet_directory_sources``)."""

routes = web.RouteTableDef()


class ReviewRequest(RequestBody):
    task_id: str = Field(alias="taskId")
    rating: int = Field(ge=1, le=5)
    text: str = Field(default="", max_length=2000)


async def module_entries(sources: list[DirectorySource], search: SearchQuery
                         ) -> list[dict[str, Any]]:
    """The agents the modules add to the listing, in hook order, each marked with its module;
    a source that fails or takes longer than ``DIRECTORY_SOURCE_TIMEOUT_S`` is left out."""
    async def listed(source: DirectorySource) -> list[dict[str, Any]]:
        try:
            entries = await asyncio.wait_for(source.list(search), DIRECTORY_SOURCE_TIMEOUT_S)
        except Exception as error:  # noqa: BLE001 - one module's failure leaves its agents out
            log.warning("event=directory-source-failed module=%s error=%r", source.module, error)
            return []
        return [entry | {"source": source.module} for entry in entries]

    return [entry for entries in await asyncio.gather(*map(listed, sources))
            for entry in entries]


@routes.get("/agents")
async def agents(request: web.Request) -> web.Response:
    """The hub's directory, then (on the first page only: the cursor is the hub's) the agents
    the modules add. When the hub cannot be asked, the modules' agents are listed with the
    hub's error as ``hubError``; with none to list, the hub's error is the answer."""
    query = request.query
    node = request.config_dict[NODE_KEY]
    search = SearchQuery(skill=query.get("skill"), tag=query.get("tag"), q=query.get("q"),
                         cursor=query.get("cursor"), limit=query_number(query, "limit", 50))
    added = [] if search.cursor else await module_entries(
        node.plugins.collect("anet_directory_sources", node=node), search)
    try:
        page = await search_remote(node.hub, search, node.aid)
    except HubError as error:
        if error.reason in QUERY_REFUSALS:
            raise AnetError("invalid-params", error.message) from None
        if not added:
            raise
        return web.json_response({"agents": added, "nextCursor": None,
                                  "hubError": error.message})
    return web.json_response({"agents": directory_listing(page.peers, own_aid=node.aid) + added,
                              "nextCursor": page.next_cursor})


@routes.get("/agents/{aid}")
async def agent(request: web.Request) -> web.Response:
    """One agent of the directory, with its whole signed card when the card verified."""
    node = request.config_dict[NODE_KEY]
    peer = await node.tasks.agent(request.match_info["aid"])
    [entry] = directory_listing([peer], own_aid=node.aid)
    if peer.verification is Verification.VERIFIED and peer.card is not None:
        entry["card"] = peer.card
    return web.json_response(entry)


@routes.post("/review")
async def review(request: web.Request) -> web.Response:
    body = await read_body(request, ReviewRequest)
    layer = request.config_dict[NODE_KEY].tasks
    return web.json_response(await layer.review(body.task_id, body.rating, body.text))
