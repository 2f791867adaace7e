"""The checks every request to a loopback listener passes (Host, Origin, bearer token), as
aiohttp middleware; what they check with is in :mod:`anet_core.control.loopback`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from aiohttp import web

from anet_core.control.loopback import bearer_matches, host_names_listener

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@dataclass(frozen=True)
class LoopbackGuard:
    """The checks every request passes, in this order: Host (421), Origin (403), token (401)."""

    port: int
    token: Callable[[], str]
    realm: str

    def refusal(self, request: web.Request) -> web.Response | None:
        if not host_names_listener(request.headers.get("Host"), self.port):
            return web.Response(status=421, text="Misdirected Request: use a loopback address "
                                f"(127.0.0.1, localhost or [::1]) with port {self.port}\n")
        if "Origin" in request.headers:
            return web.Response(status=403, text="Forbidden: requests from web pages are refused\n")
        if not bearer_matches(request.headers.get("Authorization"), self.token()):
            return web.Response(status=401, text="Unauthorized: a valid bearer token is required\n",
                                headers={"WWW-Authenticate": f'Bearer realm="{self.realm}"'})
        return None

    def middleware(self) -> Callable[[web.Request, Handler], Awaitable[web.StreamResponse]]:
        @web.middleware
        async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
            return self.refusal(request) or await handler(request)

        return guard
