"""The operator's tools (tasks other agents sent: the inbox, reply, reject; the trust list) and
the node's status."""

from __future__ import annotations

from typing import Any

from pydantic import Field

from anet_core.api import AnetError, McpCall, McpResult, McpTool
from anet_mcp.arguments import AidArgument, Arguments, TaskIdArgument, state_word
from anet_mcp.follow import task_text, text_of_parts

MODULE = "mcp"


class NoArguments(Arguments):
    pass


async def list_inbox(arguments: NoArguments, call: McpCall) -> McpResult:
    tasks = (await call.control.get("/tasks/inbox"))["tasks"]
    if not tasks:
        return McpResult("The inbox is empty: no task waits for you.", {"tasks": []})
    lines = [f"{len(tasks)} task(s) wait for you, oldest first (reply_task answers, "
             "reject_task declines):"]
    for task in tasks:
        request = text_of_parts(next(iter(task.get("history", [])), {}).get("parts", []))
        lines.append(f"- {task['id']} from {task['peer']} ({state_word(task)}): {request[:300]}")
    return McpResult("\n".join(lines), {"tasks": tasks})


class ReplyTask(Arguments):
    task_id: TaskIdArgument = Field(alias="taskId", description="a task of the inbox")
    text: str = Field(min_length=1, description="the answer, or the question to ask")
    input_required: bool = Field(
        default=False, alias="inputRequired",
        description="true: ask the requester this question instead; the task waits for the "
                    "answer")


async def reply_task(arguments: ReplyTask, call: McpCall) -> McpResult:
    task = await call.control.post("/tasks/reply", {
        "taskId": arguments.task_id, "text": arguments.text,
        "inputRequired": arguments.input_required})
    note = ("The requester was asked; its answer comes back to the inbox."
            if arguments.input_required else
            "The requester receives the answer with this node's signed receipt.")
    return McpResult(f"{task_text(task)}\n{note}", {"task": task})


class RejectTask(Arguments):
    task_id: TaskIdArgument = Field(alias="taskId", description="a task of the inbox")
    reason: str | None = Field(default=None, min_length=1, max_length=2000,
                               description="what the requester is told")


async def reject_task(arguments: RejectTask, call: McpCall) -> McpResult:
    task = await call.control.post("/tasks/reject", {"taskId": arguments.task_id,
                                                     "reason": arguments.reason})
    return McpResult(task_text(task), {"task": task})


async def list_trusted(arguments: NoArguments, call: McpCall) -> McpResult:
    trusted = (await call.control.get("/tasks/trust"))["trusted"]
    policy = (await call.control.get("/tasks/policy"))["policy"]
    lines = [f"Inbound policy: {policy}.",
             f"{len(trusted)} agent(s) on the trust list:" if trusted
             else "The trust list is empty."]
    lines += [f"- {entry['aid']}" for entry in trusted]
    return McpResult("\n".join(lines), {"policy": policy, "trusted": trusted})


class TrustArguments(Arguments):
    aid: AidArgument


async def trust_agent(arguments: TrustArguments, call: McpCall) -> McpResult:
    result = await call.control.post("/tasks/trust/add", {"aid": arguments.aid})
    verb = "added to" if result["changed"] else "was already on"
    return McpResult(f"{arguments.aid} {verb} the trust list: this node accepts its tasks "
                     "under the policy trusted.", result)


async def untrust_agent(arguments: TrustArguments, call: McpCall) -> McpResult:
    result = await call.control.post("/tasks/trust/remove", {"aid": arguments.aid})
    verb = "removed from" if result["changed"] else "was not on"
    return McpResult(f"{arguments.aid} {verb} the trust list.", result)


async def node_status(arguments: NoArguments, call: McpCall) -> McpResult:
    try:
        status: dict[str, Any] = await call.control.get("/core/status")
    except AnetError as error:
        if error.reason != "daemon-not-running":
            raise
        root = str(call.control.paths.root)
        return McpResult(f"{error.message}; {error.hint}. No tool but this one works until "
                         "then.", {"running": False, "dataDir": root, "hint": error.hint})
    hub = status["hub"]
    listeners = ", ".join(f"{item['name']} {item['address']}" for item in status["listeners"])
    text = (f"Node {status['aid']} is running (pid {status['pid']}, data {status['dataDir']}).\n"
            f"Hub: {hub.get('sentence') or hub.get('state')}\n"
            f"Modules: {', '.join(status['modules']) or 'none'}\nListeners: {listeners}")
    return McpResult(text, status)


def operator_tools() -> list[McpTool]:
    return [
        McpTool("list_inbox", "List the tasks other agents sent that wait for you to answer "
                "(reply_task) or decline (reject_task).", NoArguments, list_inbox,
                title="Inbox", read_only=True, open_world=False, module=MODULE),
        McpTool("reply_task", "Answer a task of the inbox: complete it with your text, or "
                "ask the requester a question (inputRequired).", ReplyTask, reply_task,
                title="Reply to a task", destructive=False, module=MODULE),
        McpTool("reject_task", "Decline a task of the inbox; the requester sees it rejected "
                "with your reason.", RejectTask, reject_task, title="Reject a task",
                module=MODULE),
        McpTool("list_trusted", "Show the inbound policy and the trust list: the agents "
                "whose tasks this node accepts.", NoArguments, list_trusted,
                title="Trust list", read_only=True, open_world=False, module=MODULE),
        McpTool("trust_agent", "Add an agent (AID) to the trust list, so this node accepts "
                "its tasks.", TrustArguments, trust_agent, title="Trust an agent",
                destructive=False, idempotent=True, module=MODULE),
        McpTool("untrust_agent", "Remove an agent (AID) from the trust list; its new tasks "
                "are refused.", TrustArguments, untrust_agent, title="Stop trusting an agent",
                idempotent=True, module=MODULE),
        McpTool("node_status", "Show whether this node runs, its AID, its hub connection "
                "(join state) and its modules.", NoArguments, node_status,
                title="Node status", read_only=True, open_world=False, module=MODULE),
    ]
