"""The home hub's directory and reviews: ``anet agents``, ``anet review``, and their control
routes ``/tasks/agents``, ``/tasks/agents/<aid>`` and ``/tasks/review``
(anet_core.builtins.directory_routes, loaded by the daemon only)."""

from __future__ import annotations

import argparse
import sys
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from anet_core import hookimpl
from anet_core.records import CliCommand, ControlRoutes

if TYPE_CHECKING:
    from anet_core.cli.context import CliContext
    from anet_core.node import Node


@hookimpl
def anet_routes(node: Node) -> list[ControlRoutes]:
    from anet_core.builtins.directory_routes import routes  # the daemon's side, loaded there

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
