"""How the hub's HTTP routes answer what went wrong: JSON ``{"error", "message"}``, and 503 with
the reason when the storage fails.

Not a middleware: an aiohttp middleware sits in the call chain of every request for as long as it
lasts, and a node's WebSocket lasts as long as it is connected (about 0.6 KiB per connected node).
Each HTTP route is wrapped in :func:`storage_errors` instead.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable

from aiohttp import web

from anet_hub.storage import StorageError

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def json_error(status: int, reason: str, message: str) -> web.Response:
    return web.json_response({"error": reason, "message": message}, status=status)


def storage_errors(handler: Handler) -> Handler:
    """``handler`` answering 503 with the reason when the storage fails."""
    @functools.wraps(handler)
    async def answer(request: web.Request) -> web.StreamResponse:
        try:
            return await handler(request)
        except StorageError as error:
            log.error("event=storage-error path=%s reason=%s", request.path, error.reason)
            return json_error(503, error.reason, error.message)

    return answer
