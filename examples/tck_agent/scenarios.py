"""The A2A TCK's scenario agent: the behaviour the kit asks for, selected by messageId prefix.

The kit (https://github.com/a2aproject/a2a-tck; docs/conformance.md says how it runs here)
drives its system under test through the prefix of each message's ``messageId``; the longest
matching prefix wins, so that
``tck-artifact-file-url`` is not taken for ``tck-artifact-file``. Any other message completes
with an echo. Texts and payloads are the ones the kit's reference agent uses.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from a2a.helpers import new_data_part
from a2a.server.agent_execution import AgentExecutor, RequestContext
from a2a.server.events import EventQueue
from a2a.server.tasks import TaskUpdater
from a2a.types import Message, Part

from examples.task_turns import open_task

# The kit waits for streams with a 2 s timeout and wants the resubscribe task alive for twice that.
RESUBSCRIBE_HOLD_S = 4.0
FILE_URL = "https://example.com/output.txt"


def file_part() -> Part:
    return Part(raw=b"tck", media_type="text/plain", filename="output.txt")


@dataclass
class Turn:
    """One execution of a scenario: the updater for its task and the user's message."""

    updater: TaskUpdater
    message: Message
    queue: EventQueue
    resubscribe_hold_s: float

    def say(self, text: str) -> Message:
        return self.updater.new_agent_message([Part(text=text)])

    async def artifact_then_complete(self, part: Part, *, working: bool) -> None:
        if working:
            await self.updater.start_work()
        await self.updater.add_artifact([part])
        await self.updater.complete()


Scenario = Callable[[Turn], Awaitable[None]]


async def complete_task(turn: Turn) -> None:
    await turn.updater.complete(turn.say("Hello from TCK"))


async def input_required(turn: Turn) -> None:
    await turn.updater.requires_input(turn.say("Input required"))


async def reject_task(turn: Turn) -> None:
    await turn.updater.reject(turn.say("rejected"))


async def message_response(turn: Turn) -> None:
    await turn.queue.enqueue_event(turn.say("Direct message response"))


def artifact(part: Callable[[], Part], *, working: bool) -> Scenario:
    async def scenario(turn: Turn) -> None:
        await turn.artifact_then_complete(part(), working=working)
    return scenario


def text(content: str) -> Callable[[], Part]:
    return lambda: Part(text=content)


async def stream_completed_only(turn: Turn) -> None:
    await turn.updater.complete()


async def stream_chunked(turn: Turn) -> None:
    await turn.updater.start_work()
    # Both chunks name one artifact: the first creates it, the second appends and closes it.
    artifact_id = f"{turn.updater.task_id}-chunked"
    await turn.updater.add_artifact([Part(text="chunk-1 ")], artifact_id=artifact_id,
                                    append=False, last_chunk=False)
    await turn.updater.add_artifact([Part(text="chunk-2")], artifact_id=artifact_id,
                                    append=True, last_chunk=True)
    await turn.updater.complete()


async def long_running(turn: Turn) -> None:
    await turn.updater.start_work()
    await asyncio.sleep(turn.resubscribe_hold_s)
    await turn.updater.complete()


async def echo(turn: Turn) -> None:
    said = "\n".join(part.text for part in turn.message.parts if part.HasField("text"))
    await turn.updater.complete(turn.say(f"echo: {said}"))


SCENARIOS: dict[str, Scenario] = {
    "tck-complete-task": complete_task,
    "tck-input-required": input_required,
    "tck-reject-task": reject_task,
    "tck-message-response": message_response,
    "tck-artifact-text": artifact(text("Generated text content"), working=False),
    "tck-artifact-file": artifact(file_part, working=False),
    "tck-artifact-file-url": artifact(
        lambda: Part(url=FILE_URL, media_type="text/plain", filename="output.txt"),
        working=False),
    "tck-artifact-data": artifact(lambda: new_data_part({"key": "value", "count": 42}),
                                  working=False),
    "tck-stream-001": artifact(text("Stream hello from TCK"), working=True),
    "tck-stream-002": stream_completed_only,
    "tck-stream-003": artifact(text("Stream task lifecycle"), working=True),
    "tck-stream-ordering-001": artifact(text("Ordered output"), working=True),
    "tck-stream-artifact-text": artifact(text("Streamed text content"), working=True),
    "tck-stream-artifact-file": artifact(file_part, working=True),
    "tck-stream-artifact-chunked": stream_chunked,
    "test-resubscribe-message-id": long_running,
}


def scenario_for(message_id: str) -> Scenario:
    """The scenario of the longest prefix of ``message_id``; the echo when none matches."""
    matching = [prefix for prefix in SCENARIOS if message_id.startswith(prefix)]
    return SCENARIOS[max(matching, key=len)] if matching else echo


class TckScenarioExecutor(AgentExecutor):
    def __init__(self, resubscribe_hold_s: float = RESUBSCRIBE_HOLD_S) -> None:
        self.resubscribe_hold_s = resubscribe_hold_s

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        assert context.task_id is not None and context.context_id is not None
        assert context.message is not None
        scenario = scenario_for(context.message.message_id)
        if scenario is message_response:  # a reply without a task: nothing to announce
            updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        else:
            updater = await open_task(context, event_queue)
        await scenario(Turn(updater, context.message, event_queue, self.resubscribe_hold_s))

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        # The SDK builds this context from the stored task, so its contextId is the task's.
        assert context.task_id is not None and context.context_id is not None
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()
