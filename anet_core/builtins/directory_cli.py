"""The home hub's directory and reviews: ``anet agents``, ``anet review``, and their control
routes ``/tasks/agents``, ``/tasks/agents/<aid>`` and ``/tasks/review``."""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
from typing import Any
from urllib.parse import urlencode

from aiohttp import web
from pydantic import Field

from anet_core import hookimpl
from anet_core.cli.context import CliContext
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
from anet_core.node import NODE_KEY, Node
from anet_core.records import CliCommand, ControlRoutes, DirectorySource

log = logging.getLogger(__name__)

DIRECTORY_SOURCE_TIMEOUT_S = 5.0
"""How long the listing waits for one module's agents (``anet_directory_sources``)."""

# --- control routes ------------------------------------------------------------------------------

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


@hookimpl
def anet_routes(node: Node) -> list[ControlRoutes]:
    # Below /tasks/, beside the task routes: one prefix for what the operator does on the network.
    return [ControlRoutes(module="tasks", routes=[*routes])]


# --- commands ------------------------------------------------------------------------------------


def _run_agents(args: argparse.Namespace, ctx: CliContext) -> int:
    query = {key: value for key, value in (("skill", args.skill), ("q", args.q), ("tag", args.tag))
             if value}
    page = ctx.daemon.get(f"/tasks/agents?{urlencode(query)}")
    if args.json:
        ctx.print_json(page)
        return 0
    if "hubError" in page:
        print(f"anet: the hub's directory is not listed: {page['hubError']}", file=sys.stderr)
    if not page["agents"]:
        print("No agent matches." if query else "The directory is empty.")
    for agent in page["agents"]:
        if "directPeer" in agent:
            print(f"peer:{agent['directPeer']}  {agent['aid']}  {agent.get('url', '')}  "
                  f"{agent.get('name') or '(no name)'}")
            _print_skills(agent)
            continue
        mark = " official" if agent["official"] else ""
        name = agent.get("name") or ("(no name)" if agent["verification"] == "VERIFIED"
                                     else "(card not verified)")
        print(f"{agent['aid']}  {agent['verification']:<10} {agent['keyState']:<5}{mark}  {name}")
        _print_skills(agent)
    return 0


def _print_skills(agent: dict[str, Any]) -> None:
    skills = ", ".join(skill.get("id", "") for skill in agent.get("skills", []))
    if skills:
        print(f"    skills: {skills}")


def _run_review(args: argparse.Namespace, ctx: CliContext) -> int:
    review = ctx.daemon.post("/tasks/review", {"taskId": args.task_id, "rating": args.rating,
                                               "text": args.text})
    print(f"reviewed {review['subject']}: {review['rating']}/5, with the receipt of task "
          f"{args.task_id}")
    return 0


@hookimpl
def anet_cli_commands() -> list[CliCommand]:
    def configure_agents(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--skill", help="only agents with this skill")
        parser.add_argument("--tag", help="only agents with a skill tagged so")
        parser.add_argument("--q", help="words that must occur in the name or description")
        parser.add_argument("--json", action="store_true", help="print JSON")

    def configure_review(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("task_id", metavar="task-id", help="a task you sent that completed")
        parser.add_argument("rating", type=int, choices=range(1, 6), metavar="RATING",
                            help="1 (poor) to 5 (excellent)")
        parser.add_argument("text", nargs="?", default="", help="a few words for others")

    return [
        CliCommand("agents", "search the directory of the home hub (verified fields only) "
                   "and the agents modules add (direct peers)",
                   configure_agents, _run_agents, module="core"),
        CliCommand("review", "rate the agent that completed one of your tasks, at the hub",
                   configure_review, _run_review,
                   description="Publish a signed review of the agent that completed the task. "
                               "The hub accepts it only with the agent's signed receipt of that "
                               "task, and counts one review per task.", module="core"),
    ]
