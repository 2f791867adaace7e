"""Following a task while a tool waits for it: progress notifications and the short text of a
task for the model to read."""

from __future__ import annotations

import asyncio
from contextlib import aclosing
from typing import Any
from urllib.parse import quote

from anet_core.api import McpCall
from anet_core.protocol.tasks import TaskMetadata
from anet_core.wire import TaskState
from anet_mcp.arguments import state_word

MAX_TEXT_CHARS = 4000
"""How much of a task's reply the short text carries; the structured content has all of it."""


def task_path(task_id: str) -> str:
    return f"/tasks/task/{quote(task_id, safe='')}"


async def follow(call: McpCall, task: dict[str, Any], timeout: float) -> dict[str, Any]:
    """Wait until ``task`` ends or asks for input, at most ``timeout`` seconds, reporting each
    change as progress; return the task as it is then. Giving up, or the tool call being
    cancelled, only stops the waiting: the task goes on."""
    if not TaskState(task["status"]["state"]).is_settled:
        told = describe({"task": task})  # what the caller knows already
        try:
            async with asyncio.timeout(timeout):
                async with aclosing(call.control.events(f"{task_path(task['id'])}/events")) \
                        as events:
                    async for event in events:
                        note = describe(event)
                        if note and note != told:
                            await call.progress(note)
                            told = note
                        state = (event.get("task") or event.get("statusUpdate", {})).get(
                            "status", {}).get("state")
                        if state and TaskState(state).is_settled:
                            break
        except TimeoutError:
            pass
    return await call.control.get(task_path(task["id"]))


def describe(event: dict[str, Any]) -> str:
    """One line for a progress notification of a task event."""
    if "artifactUpdate" in event:
        update = event["artifactUpdate"]
        artifact = update["artifact"]
        name = artifact.get("name") or artifact["artifactId"]
        size = len(text_of_parts(artifact.get("parts", [])))
        more = "more of " if update.get("append") else ""
        return f"{more}artifact {name!r} arrived ({size} characters of text)"
    holder = event.get("task") or event.get("statusUpdate")
    if not holder:
        return ""
    status = holder["status"]
    line = TaskState(status["state"]).word
    reason = holder.get("metadata", {}).get(TaskMetadata.REASON)
    if reason:
        line += f" ({reason})"
    words = text_of_parts((status.get("message") or {}).get("parts", []))
    return f"{line}: {words[:200]}" if words else line


def text_of_parts(parts: list[dict[str, Any]]) -> str:
    return " ".join(part["text"] if "text" in part else f"[{next(iter(part), 'part')}]"
                    for part in parts)


def task_text(task: dict[str, Any]) -> str:
    """The short text of a task: its state, why, and its latest words (the reply, or the
    question of a task that waits for input)."""
    metadata = task.get("metadata", {})
    peer = task.get("peer")
    whom = {"provider": f" from {peer}", "requester": f" to {peer}"}.get(task.get("role", ""),
                                                                       "") if peer else ""
    line = f"Task {task['id']}{whom} is {state_word(task)}"
    if metadata.get(TaskMetadata.REASON):
        line += f" ({TaskMetadata.REASON} {metadata[TaskMetadata.REASON]})"
    if metadata.get(TaskMetadata.RECEIPT_VERIFIED) is True:
        line += "; the agent's signed receipt verified"
    elif metadata.get(TaskMetadata.RECEIPT_VERIFIED) is False:
        line += "; the agent's receipt did NOT verify"
    lines = [line + "."]
    message = text_of_parts((task["status"].get("message") or {}).get("parts", []))
    if message:
        lines.append(f"Status message: {message}")
    for artifact in task.get("artifacts", []):
        name = artifact.get("name") or artifact["artifactId"]
        lines.append(f"Artifact {name!r}: {text_of_parts(artifact.get('parts', []))}")
    text = "\n".join(lines)
    if len(text) > MAX_TEXT_CHARS:
        text = text[:MAX_TEXT_CHARS] + " [… the whole task is in the structured content]"
    return text
