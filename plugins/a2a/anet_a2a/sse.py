"""Server-sent events: one ``data:`` line of single-line JSON per event, on both bindings
(the streaming operations of https://a2a-protocol.org/latest/specification/).

An error before the first event is a plain answer (the caller raises before calling
:func:`stream`); an error after it is an ``event: error``. A client that disconnects stops the
writing and detaches from the task, which goes on.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import suppress
from typing import Any

from aiohttp import web

from anet_a2a.operations import EventStream
from anet_core.wire import A2AError, A2AErrorKind, StreamResponse, compact_json

log = logging.getLogger(__name__)

HEADERS = {"Cache-Control": "no-store", "X-Accel-Buffering": "no"}
KEEPALIVE_S = 15.0
"""A stream that has had no event for this long gets an SSE comment: clients with an idle read
timeout (Hermes gives up after 30 s of silence and sends the request again) see it is alive."""
KEEPALIVE = b": keep-alive\n\n"
_END = object()


async def stream(request: web.Request, events: EventStream,
                 frame: Callable[[StreamResponse], Any],
                 error_frame: Callable[[A2AError], Any]) -> web.StreamResponse:
    """Write ``events`` as SSE; ``frame`` wraps each event (JSON-RPC envelope or bare)."""
    response = web.StreamResponse(headers=HEADERS)
    response.content_type = "text/event-stream"
    response.charset = "utf-8"
    source = events.events()
    pending: asyncio.Future[Any] | None = None
    try:
        await response.prepare(request)
        while True:
            if pending is None:
                pending = asyncio.ensure_future(anext(source, _END))
            done, _ = await asyncio.wait({pending}, timeout=KEEPALIVE_S)
            if not done:
                await response.write(KEEPALIVE)
                continue
            finished, pending = pending, None
            event = finished.result()
            if event is _END:
                break
            await response.write(f"data: {compact_json(frame(event))}\n\n".encode())
    except (ConnectionResetError, asyncio.CancelledError):
        # The client went away: EventStream.events detached the subscription on its way out.
        log.debug("event=stream-client-gone path=%s", request.path)
        raise
    except A2AError as error:
        await _write_error(response, error_frame(error))
    except Exception as error:  # the stream has started: an error event, not a 500
        log.exception("event=stream-failed path=%s", request.path)
        await _write_error(response, error_frame(A2AError(A2AErrorKind.INTERNAL_ERROR,
                                                          f"Internal error: {error}")))
    finally:
        if pending is not None:
            pending.cancel()
            with suppress(asyncio.CancelledError, Exception):
                await pending
        await source.aclose()
    with suppress(ConnectionResetError):
        await response.write_eof()
    return response


async def _write_error(response: web.StreamResponse, body: Any) -> None:
    with suppress(ConnectionResetError):
        await response.write(f"event: error\ndata: {compact_json(body)}\n\n".encode())
