"""The home hub's directory and reviews: ``anet agents``, ``anet review``, and their control
routes ``/tasks/agents``, ``/tasks/agents/<aid>`` and ``/tasks/review``."""

from __future__ import annotations

import argparse
from urllib.parse import urlencode

from aiohttp import web
from pydantic import Field

from anet_core import hookimpl
from anet_core.cli.context import CliContext
from anet_core.control.parsing import RequestBody, query_number, read_body
from anet_core.link import SearchQuery, Verification, directory_listing
from anet_core.node import NODE_KEY, Node
from anet_core.records import CliCommand, ControlRoutes

# --- control routes ------------------------------------------------------------------------------

routes = web.RouteTableDef()


class ReviewRequest(RequestBody):
    task_id: str = Field(alias="taskId")
    rating: int = Field(ge=1, le=5)
    text: str = Field(default="", max_length=2000)


@routes.get("/agents")
async def agents(request: web.Request) -> web.Response:
    query = request.query
    limit = query_number(query, "limit", 50)
    node = request.config_dict[NODE_KEY]
    page = await node.hub.search(SearchQuery(
        skill=query.get("skill"), tag=query.get("tag"), q=query.get("q"),
        cursor=query.get("cursor"), limit=limit))
    return web.json_response({"agents": directory_listing(page.peers, own_aid=node.aid),
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
    if not page["agents"]:
        print("No agent matches." if query else "The directory is empty.")
    for agent in page["agents"]:
        mark = " official" if agent["official"] else ""
        name = agent.get("name") or ("(no name)" if agent["verification"] == "VERIFIED"
                                     else "(card not verified)")
        print(f"{agent['aid']}  {agent['verification']:<10} {agent['keyState']:<5}{mark}  {name}")
        skills = ", ".join(skill.get("id", "") for skill in agent.get("skills", []))
        if skills:
            print(f"    skills: {skills}")
    return 0


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
        CliCommand("agents", "search the directory of the home hub (verified fields only)",
                   configure_agents, _run_agents, module="core"),
        CliCommand("review", "rate the agent that completed one of your tasks, at the hub",
                   configure_review, _run_review,
                   description="Publish a signed review of the agent that completed the task. "
                               "The hub accepts it only with the agent's signed receipt of that "
                               "task, and counts one review per task.", module="core"),
    ]
