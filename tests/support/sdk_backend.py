"""A backend built on the official a2a-sdk 1.x server (Starlette + uvicorn on a unix socket).

Its agent answers by the first word of the text: ``ask`` asks for input and then echoes the
answer, ``slow`` works until canceled, ``msg`` replies with a message and no task, ``two``
produces two artifacts, anything else one echo artifact. It remembers what it was sent.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

pytest_sdk = __import__("pytest").importorskip("a2a.server.routes")
uvicorn = __import__("pytest").importorskip("uvicorn")

from a2a.server.agent_execution import AgentExecutor, RequestContext  # noqa: E402
from a2a.server.events import EventQueue  # noqa: E402
from a2a.server.request_handlers import DefaultRequestHandler  # noqa: E402
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes  # noqa: E402
from a2a.server.tasks import InMemoryTaskStore, TaskUpdater  # noqa: E402
from a2a.types import (  # noqa: E402
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    Part,
    Task,
    TaskState,
    TaskStatus,
)
from starlette.applications import Starlette  # noqa: E402
from starlette.middleware.base import BaseHTTPMiddleware  # noqa: E402
from starlette.responses import JSONResponse  # noqa: E402

TOKEN = "backend-secret-token"
"""The bearer token the tests' backends require."""


@dataclass
class Seen:
    """What the backend received: messages (id, text, task, context), request metadata, the
    Authorization header of every HTTP request and the Accept header of every JSON-RPC call
    (``text/event-stream`` asks for an event stream: SendStreamingMessage)."""

    messages: list[dict[str, Any]] = field(default_factory=list)
    metadata: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)
    accepts: list[str | None] = field(default_factory=list)
    canceled: list[str] = field(default_factory=list)


class Agent(AgentExecutor):
    def __init__(self, seen: Seen) -> None:
        self.seen = seen

    async def execute(self, context: RequestContext, event_queue: EventQueue) -> None:
        text = context.get_user_input()
        self.seen.messages.append({"messageId": context.message.message_id, "text": text,
                                   "taskId": context.task_id, "contextId": context.context_id})
        self.seen.metadata.append(context.metadata)
        updater = TaskUpdater(event_queue, context.task_id, context.context_id)
        if text.startswith("msg"):
            reply = updater.new_agent_message([Part(text="direct: " + text)])
            await event_queue.enqueue_event(reply)
            return
        if context.current_task is None:
            await event_queue.enqueue_event(Task(
                id=context.task_id, context_id=context.context_id,
                status=TaskStatus(state=TaskState.TASK_STATE_SUBMITTED), history=[context.message]))
        await updater.start_work()
        if text.startswith("ask"):
            await updater.requires_input(updater.new_agent_message([Part(text="which colour?")]))
            return
        if text.startswith("slow"):
            await asyncio.sleep(60)
        if text.startswith("two"):
            await updater.add_artifact([Part(text="first")], name="one")
        await updater.add_artifact([Part(text="echo: " + text)], name="echo")
        await updater.complete()

    async def cancel(self, context: RequestContext, event_queue: EventQueue) -> None:
        self.seen.canceled.append(context.task_id)
        await TaskUpdater(event_queue, context.task_id, context.context_id).cancel()


def make_app(seen: Seen, *, streaming: bool, token: str) -> Starlette:
    card = AgentCard(
        name="SDK backend", description="a2a-sdk test backend", version="1.0.0",
        supported_interfaces=[AgentInterface(url="http://localhost/a2a/jsonrpc",
                                             protocol_binding="JSONRPC", protocol_version="1.0")],
        capabilities=AgentCapabilities(streaming=streaming, push_notifications=False),
        default_input_modes=["text/plain"], default_output_modes=["text/plain"],
        skills=[AgentSkill(id="echo", name="Echo", description="Echoes", tags=["echo"])])
    handler = DefaultRequestHandler(agent_executor=Agent(seen), task_store=InMemoryTaskStore(),
                                    agent_card=card)
    app = Starlette(routes=[*create_agent_card_routes(agent_card=card),
                            *create_jsonrpc_routes(request_handler=handler,
                                                   rpc_url="/a2a/jsonrpc")])

    async def bearer(request, call_next):  # type: ignore[no-untyped-def]
        seen.authorizations.append(request.headers.get("authorization"))
        if request.method == "POST":
            seen.accepts.append(request.headers.get("accept"))
        if request.headers.get("authorization") != f"Bearer {token}":
            return JSONResponse({"error": "unauthorized"}, status_code=401)
        return await call_next(request)

    app.add_middleware(BaseHTTPMiddleware, dispatch=bearer)
    return app


@asynccontextmanager
async def sdk_backend(path: Path, *, streaming: bool, token: str) -> AsyncIterator[Seen]:
    """Serve the SDK backend on ``path`` in this event loop until the block ends."""
    seen = Seen()
    server = uvicorn.Server(uvicorn.Config(make_app(seen, streaming=streaming, token=token),
                                           uds=str(path), log_level="warning", lifespan="off"))
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    task = asyncio.create_task(server.serve())
    try:
        async with asyncio.timeout(15):
            while not server.started:
                if task.done():
                    task.result()
                await asyncio.sleep(0.02)
        yield seen
    finally:
        server.should_exit = True
        server.force_exit = True
        async with asyncio.timeout(15):
            await task
