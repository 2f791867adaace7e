"""Tasks: ``anet send``, ``tasks``, ``task``, ``cancel``, ``inbox``, ``reply``, ``reject``,
``policy``, ``trust``, and the ``/tasks/`` control routes they call
(anet_core.builtins.tasks_routes, loaded by the daemon only; the daemon is reached only through
them).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any
from urllib.parse import urlencode

from anet_core import hookimpl
from anet_core.errors import AnetError
from anet_core.records import CliCommand, ControlRoutes

if TYPE_CHECKING:
    from anet_core.cli.context import CliContext
    from anet_core.node import Node
    from anet_core.wire import TaskState

# What the commands need of the wire models, the protocol and identities (pydantic,
# libsodium) is imported where they run: `anet --help` loads none of it.

DEFAULT_WAIT_S = 300.0


@hookimpl
def anet_routes(node: Node) -> list[ControlRoutes]:
    from anet_core.builtins.tasks_routes import routes  # the daemon's side, loaded there

    return [ControlRoutes(module="tasks", routes=[*routes])]


# --- what the commands print ---------------------------------------------------------------------


def _text_of(task: dict[str, Any]) -> str:
    """The task's latest words: the status message, else the last artifact with text, else the
    request."""
    message = task.get("status", {}).get("message")
    parts = (message or {}).get("parts") or next(
        (artifact["parts"] for artifact in reversed(task.get("artifacts", []))
         if any("text" in part for part in artifact["parts"])), None) or next(
        (m["parts"] for m in task.get("history", [])[:1]), [])
    return " ".join(part.get("text", f"[{next(iter(part), 'part')}]") for part in parts)


def _state(task: dict[str, Any]) -> TaskState:
    from anet_core.wire import TaskState

    return TaskState(task["status"]["state"])


def _print_task_line(task: dict[str, Any], peer: str) -> None:
    from anet_core.protocol.tasks import TaskMetadata

    reason = task.get("metadata", {}).get(TaskMetadata.REASON)
    print(f"{task['id']}  {_state(task).word:<14} {peer}  {_text_of(task)[:60]}"
          + (f"  ({reason})" if reason else ""))


def _print_task(task: dict[str, Any]) -> None:
    from anet_core.protocol.tasks import METADATA_PREFIX

    metadata = task.get("metadata", {})
    rows = [("task", task["id"]), ("role", task.get("role", "")), ("agent", task.get("peer", "")),
            ("state", _state(task).word), ("context", task.get("contextId", ""))]
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


# --- requester commands --------------------------------------------------------------------------


def _run_send(args: argparse.Namespace, ctx: CliContext) -> int:
    from anet_core.identity import check_aid

    task = ctx.daemon.post("/tasks/send", {"aid": check_aid(args.aid), "text": args.text})
    if args.wait:
        task = ctx.daemon.settled_task(task["id"], timeout_s=args.timeout)
    if args.json:
        ctx.print_json(task)
    else:
        print(f"task {task['id']}: {_state(task).word}")
        if _state(task).is_settled:
            print(_text_of(task))
    return 0 if not args.wait or _state(task).is_settled else 3


def _run_tasks(args: argparse.Namespace, ctx: CliContext) -> int:
    from anet_core.identity import check_aid

    query = {"pageSize": str(args.limit)} | ({"aid": check_aid(args.aid)} if args.aid else {})
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


def _run_cancel(args: argparse.Namespace, ctx: CliContext) -> int:
    """A refusal (the task ended, its payment is being settled…) is the daemon's error, with
    the reason and what to do, printed where every error is."""
    task = ctx.daemon.post("/tasks/cancel", {"taskId": args.task_id})
    if args.json:
        ctx.print_json(task)
    else:
        print(f"task {task['id']}: {_state(task).word}")
    return 0


# --- provider commands ---------------------------------------------------------------------------


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
    print(f"task {task['id']}: {_state(task).word}")
    return 0


def _run_reject(args: argparse.Namespace, ctx: CliContext) -> int:
    task = ctx.daemon.post("/tasks/reject", {"taskId": args.task_id, "reason": args.reason})
    print(f"task {task['id']}: {_state(task).word}")
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
    from anet_core.identity import check_aid

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
    result = ctx.daemon.post(f"/tasks/trust/{args.action}", {"aid": check_aid(args.aid)})
    verb = {"add": ("added to", "already on"), "remove": ("removed from", "was not on")}
    print(f"{args.aid} {verb[args.action][0 if result['changed'] else 1]} the trust list")
    return 0


def _json_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON")


@hookimpl
def anet_cli_commands() -> list[CliCommand]:
    def configure_send(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("aid", help="the agent's AID (see `anet agents`)")
        parser.add_argument("text", help="the message")
        parser.add_argument("--wait", action="store_true",
                            help="wait until the task ends or asks for input")
        parser.add_argument("--timeout", type=float, default=DEFAULT_WAIT_S,
                            help="seconds --wait waits at most (default %(default)s)")
        _json_flag(parser)

    def configure_tasks(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--aid", help="only tasks sent to this agent")
        parser.add_argument("--limit", type=int, default=50, help="at most this many (1-100)")
        _json_flag(parser)

    def configure_task(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("task_id", metavar="task-id")
        _json_flag(parser)

    def configure_reply(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--input-required", action="store_true",
                            help="ask the requester a question instead of completing the task")
        parser.add_argument("task_id", metavar="task-id")
        parser.add_argument("text")

    def configure_reject(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("task_id", metavar="task-id")
        parser.add_argument("--reason", help="what the requester is told")

    def configure_policy(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("action", choices=("show", "set"))
        parser.add_argument("policy", nargs="?", choices=("closed", "trusted", "open"))

    def configure_trust(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("action", choices=("add", "remove", "list"))
        parser.add_argument("aid", nargs="?")

    return [
        CliCommand("send", "send a text task to a remote agent", configure_send, _run_send,
                   module="core"),
        CliCommand("tasks", "list the tasks this node sent", configure_tasks, _run_tasks,
                   module="core"),
        CliCommand("task", "show one task, sent or received", configure_task, _run_task,
                   module="core"),
        CliCommand("cancel", "cancel a task this node sent (refused once its payment settled)",
                   configure_task, _run_cancel, module="core"),
        CliCommand("inbox", "tasks other agents sent that wait for you", _json_flag, _run_inbox,
                   module="core"),
        CliCommand("reply", "answer a task in the inbox (completes it, with a signed receipt)",
                   configure_reply, _run_reply, module="core"),
        CliCommand("reject", "decline a task in the inbox", configure_reject, _run_reject,
                   module="core"),
        CliCommand("policy", "show or set who may send you tasks: closed, trusted, open",
                   configure_policy, _run_policy, module="core"),
        CliCommand("trust", "the agents whose tasks you accept under the trusted policy",
                   configure_trust, _run_trust, module="core"),
    ]
