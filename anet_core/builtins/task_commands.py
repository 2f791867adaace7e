"""The operator's task commands: inbox, reply, reject, policy, trust, agents, send, tasks,
task, evidence verify, keys rotate. They reach the daemon only through ``/tasks/`` routes."""

from __future__ import annotations

import argparse
import time
from typing import Any
from urllib.parse import urlencode

from anet_core import hookimpl
from anet_core.cli.context import CliContext
from anet_core.daemon import running_pid
from anet_core.errors import AnetError
from anet_core.evidence import chain_path, verify
from anet_core.identity import Identity, is_aid
from anet_core.protocol.tasks import METADATA_PREFIX, TaskMetadata
from anet_core.records import CliCommand
from anet_core.wire import TaskState

WAIT_POLL_S = 0.2
DEFAULT_WAIT_S = 300.0


def _require_aid(aid: str) -> str:
    if not is_aid(aid):
        raise AnetError("invalid-aid", f"{aid!r} is not an AID (32 characters of a-z and 2-7)",
                        hint="copy the AID from `anet agents`")
    return aid


def _text_of(task: dict[str, Any]) -> str:
    """The task's latest words: the status message, else the last artifact with text, else the
    request."""
    message = task.get("status", {}).get("message")
    parts = (message or {}).get("parts") or next(
        (artifact["parts"] for artifact in reversed(task.get("artifacts", []))
         if any("text" in part for part in artifact["parts"])), None) or next(
        (m["parts"] for m in task.get("history", [])[:1]), [])
    return " ".join(part.get("text", f"[{next(iter(part), 'part')}]") for part in parts)


def _state(task: dict[str, Any]) -> str:
    return task["status"]["state"].removeprefix("TASK_STATE_").lower().replace("_", "-")


def _print_task_line(task: dict[str, Any], peer: str) -> None:
    reason = task.get("metadata", {}).get(TaskMetadata.REASON)
    print(f"{task['id']}  {_state(task):<14} {peer}  {_text_of(task)[:60]}"
          + (f"  ({reason})" if reason else ""))


def _print_task(task: dict[str, Any]) -> None:
    metadata = task.get("metadata", {})
    rows = [("task", task["id"]), ("role", task.get("role", "")), ("agent", task.get("peer", "")),
            ("state", _state(task)), ("context", task.get("contextId", ""))]
    rows += [(key.removeprefix(METADATA_PREFIX), str(value))
             for key, value in sorted(metadata.items()) if key.startswith(METADATA_PREFIX)]
    for label, value in rows:
        if value:
            print(f"  {label:<16} {value}")
    for message in task.get("history", []):
        who = "you" if (message["role"] == "ROLE_USER") == (task.get("role") == "requester") \
            else "them"
        print(f"  [{who}] {_text_of({'status': {'message': message}})}")
    for artifact in task.get("artifacts", []):
        name = artifact.get("name") or artifact["artifactId"]
        print(f"  [artifact {name}] {_text_of({'artifacts': [artifact]})}")


# --- requester commands ------------------------------------------------------------------------


def _run_send(args: argparse.Namespace, ctx: CliContext) -> int:
    task = ctx.daemon.post("/tasks/send", {"aid": _require_aid(args.aid), "text": args.text})
    if args.wait:
        deadline = time.monotonic() + args.timeout
        while not _settled(task) and time.monotonic() < deadline:
            time.sleep(WAIT_POLL_S)
            task = ctx.daemon.get(f"/tasks/task/{task['id']}")
    if args.json:
        ctx.print_json(task)
    else:
        print(f"task {task['id']}: {_state(task)}")
        if _settled(task):
            print(_text_of(task))
    return 0 if not args.wait or _settled(task) else 3


def _settled(task: dict[str, Any]) -> bool:
    state = TaskState(task["status"]["state"])
    return state.is_terminal or state.is_interrupted


def _run_tasks(args: argparse.Namespace, ctx: CliContext) -> int:
    query = {"pageSize": str(args.limit)} | ({"aid": _require_aid(args.aid)} if args.aid else {})
    page = ctx.daemon.get(f"/tasks/list?{urlencode(query)}")
    if args.json:
        ctx.print_json(page)
        return 0
    if not page["tasks"]:
        print("No tasks sent yet. `anet send <aid> <text>` sends one.")
    for task in page["tasks"]:
        _print_task_line(task, task.get("peer", ""))
    return 0


def _run_task(args: argparse.Namespace, ctx: CliContext) -> int:
    task = ctx.daemon.get(f"/tasks/task/{args.task_id}")
    if args.json:
        ctx.print_json(task)
    else:
        _print_task(task)
    return 0


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


# --- provider commands -------------------------------------------------------------------------


def _run_inbox(args: argparse.Namespace, ctx: CliContext) -> int:
    tasks = ctx.daemon.get("/tasks/inbox")["tasks"]
    if args.json:
        ctx.print_json(tasks)
        return 0
    if not tasks:
        print("The inbox is empty.")
    for task in tasks:
        _print_task_line(task, task["peer"])
    if tasks:
        print("\n`anet reply <task-id> <text>` answers; `anet reject <task-id>` declines.")
    return 0


def _run_reply(args: argparse.Namespace, ctx: CliContext) -> int:
    task = ctx.daemon.post("/tasks/reply", {"taskId": args.task_id, "text": args.text,
                                            "inputRequired": args.input_required})
    print(f"task {task['id']}: {_state(task)}")
    return 0


def _run_reject(args: argparse.Namespace, ctx: CliContext) -> int:
    task = ctx.daemon.post("/tasks/reject", {"taskId": args.task_id, "reason": args.reason})
    print(f"task {task['id']}: {_state(task)}")
    return 0


def _run_review(args: argparse.Namespace, ctx: CliContext) -> int:
    review = ctx.daemon.post("/tasks/review", {"taskId": args.task_id, "rating": args.rating,
                                               "text": args.text})
    print(f"reviewed {review['subject']}: {review['rating']}/5, with the receipt of task "
          f"{args.task_id}")
    return 0


def _run_policy(args: argparse.Namespace, ctx: CliContext) -> int:
    if args.action == "set":
        if args.policy is None:
            raise AnetError("policy-missing", "`anet policy set` needs a policy",
                            hint="anet policy set closed|trusted|open")
        policy = ctx.daemon.post("/tasks/policy", {"policy": args.policy})["policy"]
    else:
        policy = ctx.daemon.get("/tasks/policy")["policy"]
    print(f"inbound policy: {policy}")
    return 0


def _run_trust(args: argparse.Namespace, ctx: CliContext) -> int:
    if args.action == "list":
        trusted = ctx.daemon.get("/tasks/trust")["trusted"]
        if not trusted:
            print("The trust list is empty.")
        for entry in trusted:
            print(entry["aid"])
        return 0
    if args.aid is None:
        raise AnetError("aid-missing", f"`anet trust {args.action}` needs an AID",
                        hint=f"anet trust {args.action} <aid>")
    result = ctx.daemon.post(f"/tasks/trust/{args.action}", {"aid": _require_aid(args.aid)})
    verb = {"add": ("added to", "already on"), "remove": ("removed from", "was not on")}
    print(f"{args.aid} {verb[args.action][0 if result['changed'] else 1]} the trust list")
    return 0


# --- evidence and keys ---------------------------------------------------------------------------


def _run_evidence_verify(args: argparse.Namespace, ctx: CliContext) -> int:
    identity = Identity.load(ctx.paths.identity)
    report = verify(chain_path(ctx.paths.root), identity.verified_history)
    if report.ok:
        print(f"evidence chain OK: {report.records} records, signed by {identity.aid}")
        return 0
    print(f"evidence chain has {len(report.issues)} problem(s) in {report.records} records:")
    for issue in report.issues:
        where = f" (seq {issue.seq})" if issue.seq is not None else ""
        print(f"  {issue.reason}{where}: {issue.detail}")
    return 1


def _run_keys_rotate(args: argparse.Namespace, ctx: CliContext) -> int:
    if running_pid(ctx.paths) is not None:
        result = ctx.daemon.post("/tasks/keys/rotate", {"emergency": args.emergency})
        key_seq = result["keySeq"]
        tail = "; the card was republished"
    else:
        key_seq = Identity.load(ctx.paths.identity).rotate(emergency=args.emergency).key_seq
        tail = "; the card is republished when the node next connects"
    kind = "emergency rotation (signed by the recovery key)" if args.emergency else "rotation"
    print(f"key {kind} done: now at key seq {key_seq}{tail}")
    return 0


@hookimpl
def anet_cli_commands() -> list[CliCommand]:
    def json_flag(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="print JSON")

    def configure_send(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("aid", help="the agent's AID (see `anet agents`)")
        parser.add_argument("text", help="the message")
        parser.add_argument("--wait", action="store_true",
                            help="wait until the task ends or asks for input")
        parser.add_argument("--timeout", type=float, default=DEFAULT_WAIT_S,
                            help="seconds --wait waits at most (default %(default)s)")
        json_flag(parser)

    def configure_tasks(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--aid", help="only tasks sent to this agent")
        parser.add_argument("--limit", type=int, default=50, help="at most this many (1-100)")
        json_flag(parser)

    def configure_task(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("task_id", metavar="task-id")
        json_flag(parser)

    def configure_agents(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--skill", help="only agents with this skill")
        parser.add_argument("--tag", help="only agents with a skill tagged so")
        parser.add_argument("--q", help="words that must occur in the name or description")
        json_flag(parser)

    def configure_reply(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--input-required", action="store_true",
                            help="ask the requester a question instead of completing the task")
        parser.add_argument("task_id", metavar="task-id")
        parser.add_argument("text")

    def configure_reject(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("task_id", metavar="task-id")
        parser.add_argument("--reason", help="what the requester is told")

    def configure_review(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("task_id", metavar="task-id", help="a task you sent that completed")
        parser.add_argument("rating", type=int, choices=range(1, 6), metavar="RATING",
                            help="1 (poor) to 5 (excellent)")
        parser.add_argument("text", nargs="?", default="", help="a few words for others")

    def configure_policy(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("action", choices=("show", "set"))
        parser.add_argument("policy", nargs="?", choices=("closed", "trusted", "open"))

    def configure_trust(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("action", choices=("add", "remove", "list"))
        parser.add_argument("aid", nargs="?")

    def configure_rotate(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--emergency", action="store_true",
                            help="rotate with the recovery key: the old keys are revoked")

    return [
        CliCommand("send", "send a text task to a remote agent", configure_send, _run_send,
                   module="core"),
        CliCommand("tasks", "list the tasks this node sent", configure_tasks, _run_tasks,
                   module="core"),
        CliCommand("task", "show one task, sent or received", configure_task, _run_task,
                   module="core"),
        CliCommand("agents", "search the directory of the home hub (verified fields only)",
                   configure_agents, _run_agents, module="core"),
        CliCommand("inbox", "tasks other agents sent that wait for you", json_flag, _run_inbox,
                   module="core"),
        CliCommand("reply", "answer a task in the inbox (completes it, with a signed receipt)",
                   configure_reply, _run_reply, module="core"),
        CliCommand("reject", "decline a task in the inbox", configure_reject, _run_reject,
                   module="core"),
        CliCommand("review", "rate the agent that completed one of your tasks, at the hub",
                   configure_review, _run_review,
                   description="Publish a signed review of the agent that completed the task. "
                               "The hub accepts it only with the agent's signed receipt of that "
                               "task, and counts one review per task.", module="core"),
        CliCommand("policy", "show or set who may send you tasks: closed, trusted, open",
                   configure_policy, _run_policy, module="core"),
        CliCommand("trust", "the agents whose tasks you accept under the trusted policy",
                   configure_trust, _run_trust, module="core"),
        CliCommand("evidence verify", "check the evidence chain for changed, removed or "
                   "inserted records", lambda parser: None, _run_evidence_verify, module="core"),
        CliCommand("keys rotate", "rotate this node's keys (the AID stays)", configure_rotate,
                   _run_keys_rotate, module="core"),
    ]
