"""The requester's tools: find agents, read a card, send and follow tasks, cancel, review."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode

from pydantic import Field

from anet_core.api import McpCall, McpResult, McpTool
from anet_core.protocol.frames import MAX_SEARCH_LIMIT
from anet_core.protocol.tasks import TaskMetadata
from anet_core.wire import LIST_TASKS_MAX_PAGE_SIZE
from anet_mcp.arguments import (
    DEFAULT_WAIT_S,
    WORD_STATES,
    AidArgument,
    Arguments,
    StateWord,
    TaskIdArgument,
    WaitSeconds,
    state_word,
)
from anet_mcp.follow import follow, task_path, task_text

MODULE = "mcp"


def _query(**values: Any) -> str:
    present = {key: str(value) for key, value in values.items() if value not in (None, "")}
    return f"?{urlencode(present)}" if present else ""


def _agent_line(agent: dict[str, Any]) -> str:
    skills = ", ".join(skill.get("id", "") for skill in agent.get("skills", []))
    name = agent.get("name") or "(card not verified: no name shown)"
    official = " official" if agent.get("official") else ""
    return (f"- {agent['aid']}: {name} [{agent['verification']}{official}]"
            + (f" skills: {skills}" if skills else ""))


class FindAgents(Arguments):
    skill: str | None = Field(default=None, description="only agents offering this skill id")
    tag: str | None = Field(default=None, description="only agents with a skill tagged so")
    q: str | None = Field(default=None,
                          description="words that must occur in the name or description")
    cursor: str | None = Field(default=None,
                               description="nextCursor of the previous page, for the next one")
    limit: int = Field(default=20, ge=1, le=MAX_SEARCH_LIMIT, description="agents per page")


async def find_agents(arguments: FindAgents, call: McpCall) -> McpResult:
    page = await call.control.get("/tasks/agents" + _query(
        skill=arguments.skill, tag=arguments.tag, q=arguments.q, cursor=arguments.cursor,
        limit=arguments.limit))
    agents = page["agents"]
    lines = [f"{len(agents)} agent(s) in the directory of the home hub:" if agents
             else "No agent matches."]
    lines += [_agent_line(agent) for agent in agents]
    if page.get("nextCursor"):
        lines.append(f"More: call find_agents again with cursor {page['nextCursor']!r}.")
    return McpResult("\n".join(lines), page)


class AgentCard(Arguments):
    aid: AidArgument


async def get_agent_card(arguments: AgentCard, call: McpCall) -> McpResult:
    agent = await call.control.get(f"/tasks/agents/{arguments.aid}")
    lines = [_agent_line(agent).removeprefix("- ")]
    if agent.get("description"):
        lines.append(agent["description"])
    for skill in agent.get("skills", []):
        lines.append(f"skill {skill.get('id')}: {skill.get('description', '')}".rstrip(": "))
    if agent.get("reviewCount"):
        lines.append(f"{agent['reviewCount']} review(s), average {agent['avgRating']}/5")
    return McpResult("\n".join(lines), agent)


class SendTask(Arguments):
    aid: AidArgument
    text: str = Field(min_length=1, description="the message to the agent")
    context_id: str | None = Field(
        default=None, alias="contextId", min_length=1, max_length=200,
        description="contextId of an earlier task, to continue that conversation in a new task")
    task_id: TaskIdArgument | None = Field(
        default=None, alias="taskId",
        description="the id of this agent's task that asks for input (input-required): the "
                    "text is the answer")
    skill: str | None = Field(default=None, description="the skill id to ask for, if any")
    wait: bool = Field(default=True, description="wait until the task ends or asks for input; "
                                                 "false returns at once")
    timeout: WaitSeconds = DEFAULT_WAIT_S


async def send_task(arguments: SendTask, call: McpCall) -> McpResult:
    body = {"aid": arguments.aid, "text": arguments.text, "skill": arguments.skill,
            "contextId": arguments.context_id, "taskId": arguments.task_id}
    task = await call.control.post("/tasks/send", {k: v for k, v in body.items() if v})
    await call.progress(f"sent task {task['id']} to {arguments.aid}")
    if arguments.wait:
        task = await follow(call, task, arguments.timeout)
    else:
        task = await call.control.get(task_path(task["id"]))
    return McpResult(_with_next_step(task, arguments.wait), {"task": task})


class GetTask(Arguments):
    task_id: TaskIdArgument = Field(alias="taskId")
    wait: bool = Field(default=False, description="for a task this node sent: wait until it "
                                                  "ends or asks for input")
    timeout: WaitSeconds = DEFAULT_WAIT_S


async def get_task(arguments: GetTask, call: McpCall) -> McpResult:
    task = await call.control.get(task_path(arguments.task_id))
    if arguments.wait and task.get("role") == "requester":
        task = await follow(call, task, arguments.timeout)
    return McpResult(_with_next_step(task, arguments.wait), {"task": task})


def _with_next_step(task: dict[str, Any], waited: bool) -> str:
    text = task_text(task)
    state = state_word(task)
    if task.get("role") != "requester":
        return text
    if state == "input-required":
        return text + (f"\nThe agent asks for input: answer with send_task (aid "
                       f"{task.get('peer')}, taskId {task['id']}).")
    if state in {"submitted", "working"}:
        return text + ("\nStill running" + (" after the wait" if waited else "")
                       + f": get_task with taskId {task['id']} and wait true waits for it.")
    return text


class ListTasks(Arguments):
    aid: AidArgument | None = Field(default=None, description="only tasks sent to this agent")
    context_id: str | None = Field(default=None, alias="contextId",
                                   description="only tasks of this conversation")
    state: StateWord | None = Field(default=None, description="only tasks in this state")
    page_size: int = Field(default=20, alias="pageSize", ge=1, le=LIST_TASKS_MAX_PAGE_SIZE)
    page_token: str | None = Field(default=None, alias="pageToken",
                                   description="nextPageToken of the previous page")


async def list_tasks(arguments: ListTasks, call: McpCall) -> McpResult:
    state = WORD_STATES[arguments.state].value if arguments.state else None
    page = await call.control.get("/tasks/list" + _query(
        aid=arguments.aid, contextId=arguments.context_id, status=state,
        pageSize=arguments.page_size, pageToken=arguments.page_token))
    tasks = page["tasks"]
    lines = [f"{len(tasks)} of {page.get('totalSize', len(tasks))} task(s) this node sent, "
             "newest first:" if tasks else "No task matches."]
    for task in tasks:
        reason = task.get("metadata", {}).get(TaskMetadata.REASON)
        lines.append(f"- {task['id']} to {task.get('peer')}: {state_word(task)}"
                     + (f" ({reason})" if reason else ""))
    if page.get("nextPageToken"):
        lines.append(f"More: call list_tasks again with pageToken {page['nextPageToken']!r}.")
    return McpResult("\n".join(lines), page)


class CancelTask(Arguments):
    task_id: TaskIdArgument = Field(alias="taskId")


async def cancel_task(arguments: CancelTask, call: McpCall) -> McpResult:
    task = await call.control.post("/tasks/cancel", {"taskId": arguments.task_id})
    return McpResult(task_text(task), {"task": task})


class ReviewAgent(Arguments):
    task_id: TaskIdArgument = Field(alias="taskId",
                            description="a task this node sent that the agent completed")
    rating: int = Field(ge=1, le=5, description="1 (poor) to 5 (excellent)")
    text: str = Field(default="", max_length=2000, description="a few words for others")


async def review_agent(arguments: ReviewAgent, call: McpCall) -> McpResult:
    review = await call.control.post("/tasks/review", {
        "taskId": arguments.task_id, "rating": arguments.rating, "text": arguments.text})
    return McpResult(f"Reviewed {review['subject']}: {review['rating']}/5, with its signed "
                     f"receipt of task {arguments.task_id}.", {"review": review})


def requester_tools() -> list[McpTool]:
    return [
        McpTool("find_agents", "Search the network's directory for agents by skill, tag or "
                "words; returns their AIDs, names and skills.", FindAgents, find_agents,
                title="Find agents", read_only=True, module=MODULE),
        McpTool("get_agent_card", "Read one agent's verified card (name, description, "
                "skills, price, reviews) by its AID.", AgentCard, get_agent_card,
                title="Read an agent's card", read_only=True, module=MODULE),
        McpTool("send_task", "Send a text task to an agent by AID and, by default, wait for "
                "its answer; taskId answers its question, contextId continues a conversation.",
                SendTask, send_task, title="Send a task", destructive=False, module=MODULE),
        McpTool("get_task", "Read a task (sent or received) by id: state, anet.* metadata, "
                "messages and artifacts; wait=true waits for a sent task to end.", GetTask,
                get_task, title="Get a task", read_only=True, open_world=False, module=MODULE),
        McpTool("list_tasks", "List the tasks this node sent, newest first, optionally by "
                "agent, conversation or state.", ListTasks, list_tasks, title="List sent tasks",
                read_only=True, open_world=False, module=MODULE),
        McpTool("cancel_task", "Cancel a task this node sent and ask the agent to stop "
                "working on it.", CancelTask, cancel_task, title="Cancel a task",
                module=MODULE),
        McpTool("review_agent", "Publish a signed 1-5 rating of the agent that completed one "
                "of your tasks (one review per task).", ReviewAgent, review_agent,
                title="Review an agent", destructive=False, module=MODULE),
    ]

