"""The request checks of every route, in the order docs/a2a.md ("Errors") gives (local
endpoint).

1. Host names 127.0.0.1, localhost or [::1] with this listener's port   else 421
2. no Origin header                                                     else 403
3. the current bearer token (a2a_token.txt, re-read when replaced)      else 401
4. a body is application/json or application/a2a+json      else ContentTypeNotSupportedError
5. the body is at most 96 MiB                                           else 413
6. A2A-Version (header, then query parameter): absent or major 1  else VersionNotSupportedError

The published surface replaces 1-3 with its own gate (a token for task routes, the alias
published, the rate limit; docs/publishing.md) and keeps 4-6 with a smaller body limit. A
request that fails two checks gets the first one's answer. The body is read here, with a size
cap and a deadline (a client that trickles its body is answered 408), and kept for the handler.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from anet_a2a.replies import Binding, error_reply
from anet_core.api import LoopbackGuard
from anet_core.wire import A2AError, A2AErrorKind, JsonRpcId, parse_json

REALM = "anet-local-a2a"
BODY_LIMIT = 96 * 1024 * 1024
BODY_MEDIA_TYPES = frozenset({"application/json", "application/a2a+json"})
VERSION_HEADER = "A2A-Version"
SUPPORTED_VERSION = "1.0"
_MAJOR_1 = re.compile(r"\A1(\.\d+){0,2}\Z")

BODY = web.RequestKey("a2a-body", bytes)
"""The request body, read by the checks."""
JSONRPC_ROUTE = "jsonrpc"
"""Name prefix of the JSON-RPC routes: their check failures are JSON-RPC errors at HTTP 200."""

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Gate = Callable[[web.Request], Awaitable[web.StreamResponse | None]]
"""The first checks of a listener: None lets the request on, a response refuses it."""


def loopback_gate(guard: LoopbackGuard) -> Gate:
    async def gate(request: web.Request) -> web.StreamResponse | None:
        return guard.refusal(request)

    return gate


def binding_of(request: web.Request) -> Binding:
    name = request.match_info.route.name or ""
    return Binding.JSONRPC if name.startswith(JSONRPC_ROUTE) else Binding.REST


def request_id_of(body: bytes) -> JsonRpcId:
    """The JSON-RPC id of a body, when it has a usable one (so early errors echo it)."""
    try:
        document = parse_json(body)
    except ValueError:
        return None
    value = document.get("id") if isinstance(document, dict) else None
    return value if isinstance(value, str | int) and not isinstance(value, bool) else None


def version_error(request: web.Request) -> A2AError | None:
    value = request.headers.get(VERSION_HEADER)
    if value is None:
        value = request.query.get(VERSION_HEADER)
    if not value or _MAJOR_1.match(value.strip()):
        return None
    return A2AError(A2AErrorKind.VERSION_NOT_SUPPORTED,
                    f"A2A version {value[:40]!r} is not supported; this endpoint speaks "
                    f"{SUPPORTED_VERSION} (send {VERSION_HEADER}: {SUPPORTED_VERSION})")


def content_type_error(request: web.Request) -> A2AError | None:
    if not request.body_exists or request.content_type in BODY_MEDIA_TYPES:
        return None
    sent = request.headers.get("Content-Type", "none")
    return A2AError(A2AErrorKind.CONTENT_TYPE_NOT_SUPPORTED,
                    f"Content type {sent[:80]!r} is not supported: send the body as "
                    "application/json or application/a2a+json")


def _too_large(binding: Binding, limit: int) -> web.Response:
    shown = f"{limit >> 20} MiB" if limit >= 1 << 20 else f"{limit} bytes"
    reply = error_reply(binding, A2AError(
        A2AErrorKind.INVALID_REQUEST, f"The request body is larger than {shown}"),
        status=413)
    reply.force_close()  # the rest of the body is never read
    return reply


@dataclass(frozen=True)
class RequestChecks:
    gate: Gate
    body_timeout: float
    body_limit: int = BODY_LIMIT

    def middleware(self) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
        @web.middleware
        async def checks(request: web.Request, handler: Handler) -> web.StreamResponse:
            refusal = await self.gate(request)
            if refusal is not None:
                return refusal
            binding = binding_of(request)
            error = content_type_error(request)
            if error is not None:
                return error_reply(binding, error)
            if (request.content_length or 0) > self.body_limit:
                return _too_large(binding, self.body_limit)
            try:
                if request.content.is_eof():
                    body = await request.read()  # all of it arrived: nothing to wait for
                else:
                    async with asyncio.timeout(self.body_timeout):
                        body = await request.read()
            except web.HTTPRequestEntityTooLarge:
                return _too_large(binding, self.body_limit)
            except web.RequestPayloadError as failure:  # e.g. Content-Encoding: gzip, not gzip
                reply = error_reply(binding, A2AError(
                    A2AErrorKind.PARSE_ERROR,
                    f"The request body cannot be read: {str(failure).splitlines()[-1].strip()}"
                    " (send it uncompressed, or compressed as its Content-Encoding says)"))
                # What is left of the body is not read: without the end marked here, aiohttp
                # would read on after the answer, meet the same error and log a traceback.
                request.content.feed_eof()
                reply.force_close()
                return reply
            except TimeoutError:
                reply = error_reply(binding, A2AError(
                    A2AErrorKind.INVALID_REQUEST,
                    f"The request body did not arrive within {self.body_timeout:g} s"),
                    status=408)
                reply.force_close()
                return reply
            request[BODY] = body
            error = version_error(request)
            if error is not None:
                return error_reply(binding, error, request_id_of(body))
            return await handler(request)

        return checks
