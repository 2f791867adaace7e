"""The text agent's AgentExecutor: one task per request, text reply first, then the numbers.

Event order on every successful turn: the Task (first turn only), a WORKING status, the reply
artifact (text), the data artifact (numbers), COMPLETED. A turn without text ends in
INPUT_REQUIRED, and the next message on the same task continues it with the skill chosen before.
"""

from __future__ import annotations

import asyncio

from a2a.helpers import new_data_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Part, TaskState
from google.protobuf.json_format import MessageToDict

from examples.task_turns import open_task
from examples.text_agent.skill_requests import (
    RequestError,
    SkillRequest,
    parse_request,
    run_skill,
    validate,
)

# Pure-Python analysis is linear in the text; past this size a backend should not be used as a
# batch processor for other people's documents.
MAX_TEXT_CHARS = 1_000_000
REPLY_ARTIFACT = "reply"
# Task metadata that carries the skill and options of a turn that still waits for its text. It is
# kept on the task, not in this process, so the follow-up may come through any request path.
PENDING_REQUEST_KEY = "textAgent"
ASK_FOR_TEXT = {
    "stats": "Send the text to count.",
    "summarize": "Send the text to summarise.",
    "transform": "Send the text to transform.",
}


def request_of(message: Message, request_metadata: dict[str, object]) -> SkillRequest:
    """The request in one message; message metadata wins over request metadata."""
    text = "\n".join(part.text for part in message.parts if part.HasField("text"))
    metadata = {**request_metadata, **MessageToDict(message.metadata)}
    return parse_request(text, metadata)


def request_for_turn(context: RequestContext) -> SkillRequest:
    """This turn's request, completed with the options an earlier turn left on the task."""
    assert context.message is not None
    request = request_of(context.message, context.metadata)
    task = context.current_task
    if task is not None and PENDING_REQUEST_KEY in task.metadata:
        pending = MessageToDict(task.metadata)[PENDING_REQUEST_KEY]
        request = request.continuing(parse_request("", pending))
    return request


class TextAgentExecutor(AgentExecutor):
    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        updater = await open_task(context, event_queue)
        try:
            request = request_for_turn(context)
            validate(request)
        except RequestError as refusal:
            await updater.reject(updater.new_agent_message([Part(text=str(refusal))]))
            return
        if not request.text.strip():
            question = ASK_FOR_TEXT[request.effective_skill]
            await updater.update_status(
                TaskState.TASK_STATE_INPUT_REQUIRED,
                message=updater.new_agent_message([Part(text=question)]),
                metadata={PENDING_REQUEST_KEY: request.options()})
            return
        if len(request.text) > MAX_TEXT_CHARS:
            await updater.reject(updater.new_agent_message([Part(
                text=f"the text has {len(request.text)} characters; this agent takes at most "
                     f"{MAX_TEXT_CHARS}")]))
            return
        await updater.start_work()
        # In a thread so that a large text does not stall the other requests on this server.
        result = await asyncio.to_thread(run_skill, request)
        skill = request.effective_skill
        await updater.add_artifact([Part(text=result.reply)], name=REPLY_ARTIFACT)
        await updater.add_artifact([new_data_part(result.data, "application/json")], name=skill)
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        # The SDK builds this context from the stored task, so its contextId is the task's.
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()
