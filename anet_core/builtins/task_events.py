"""``GET /tasks/task/<id>/events``: a task's events as server-sent events, for clients that follow
a task while it runs (``anet mcp`` reports them as MCP progress)."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING, Any

from anet_core import hookimpl
from anet_core.control.client import EVENT_KEEPALIVE_S
from anet_core.records import ControlRoutes

if TYPE_CHECKING:
    import asyncio

    from aiohttp import web

    from anet_core.node import Node

log = logging.getLogger(__name__)


async def task_events(node: Node, request: web.Request) -> web.StreamResponse:
    """The events of a task this node sent, as server-sent events: each ``data:`` line is an
    A2A StreamResponse (first ``{"task": ...}``, the task as it is now, then every
    ``statusUpdate`` and ``artifactUpdate`` in order); the stream ends after a terminal state,
    or when the daemon stops. A comment every EVENT_KEEPALIVE_S keeps an idle stream alive and
    finds a reader that went away. Closing the stream changes nothing about the task."""
    import asyncio

    from aiohttp import web

    subscription = node.tasks.subscribe(None, request.match_info["task_id"])
    response = web.StreamResponse(headers={"Content-Type": "text/event-stream",
                                           "Cache-Control": "no-cache"})
    events = aiter(subscription)
    stopping = asyncio.ensure_future(node.stopping.wait())
    upcoming: asyncio.Future[dict[str, Any]] | None = None
    try:
        await response.prepare(request)
        while not stopping.done():
            upcoming = upcoming or asyncio.ensure_future(anext(events))
            await asyncio.wait({upcoming, stopping}, timeout=EVENT_KEEPALIVE_S,
                               return_when=asyncio.FIRST_COMPLETED)
            if not upcoming.done():
                if not stopping.done():
                    await response.write(b": keep-alive\n\n")
                continue
            try:
                event = upcoming.result()
            except StopAsyncIteration:
                break
            upcoming = None
            await response.write(f"data: {json.dumps(event)}\n\n".encode())
        await response.write_eof()
    except ConnectionResetError:
        log.debug("event=events-reader-gone task=%s", subscription.task_id)
    finally:
        for pending in (upcoming, stopping):
            if pending is not None:
                pending.cancel()
        subscription.close()
    return response


@hookimpl
def anet_routes(node: Node) -> list[ControlRoutes]:
    # aiohttp loads with the daemon, which calls this hook; a command never does.
    from aiohttp import web

    async def events(request: web.Request) -> web.StreamResponse:
        return await task_events(node, request)

    return [ControlRoutes(module="tasks", routes=[web.get("/task/{task_id}/events", events)])]
