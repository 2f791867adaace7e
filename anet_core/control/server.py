"""The control plane server: one sub-application per module, behind the control token.

Every handler raises its refusals as :class:`AnetError` (or :class:`HubError` when the hub is the
cause); one middleware turns them into ``{"error", "message", "hint", "detail"}`` with a status,
and the CLI's control client turns that back into the AnetError it prints.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web

from anet_core.control.guard import Handler, LoopbackGuard
from anet_core.control.loopback import TokenFile, bind_loopback
from anet_core.errors import AnetError
from anet_core.link import HubError
from anet_core.node import NODE_KEY, Listener, Node
from anet_core.records import ControlRoutes
from anet_core.util.fsutil import write_atomic
from anet_core.util.serverlog import SERVER_LOG

CONTROL_REALM = "anet-control"

ERROR_STATUS = {"task-not-found": 404, "unknown-agent": 404, "not-registered": 409,
                "hub-unavailable": 502}
"""The HTTP status of a refusal by its reason; any other reason answers 400."""

HUB_HINT = "`anet status` shows the hub connection"

log = logging.getLogger(__name__)


def error_response(error: AnetError) -> web.Response:
    return web.json_response(error.as_dict(), status=ERROR_STATUS.get(error.reason, 400))


@web.middleware
async def refusals(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Render what a handler refused as one JSON error (the CLI prints it as one line and a
    hint). HTTP exceptions (unknown route, wrong method) pass through as aiohttp makes them."""
    try:
        return await handler(request)
    except AnetError as error:
        return error_response(error)
    except HubError as error:
        return error_response(AnetError("hub-unavailable", error.message, hint=HUB_HINT))


def _claims(group: ControlRoutes) -> list[str]:
    return [f"the control route {route.method} /{group.module}{route.path}"
            for route in group.routes]


def build_app(node: Node, port: int, token: TokenFile) -> web.Application:
    """The control plane: ``/<module>/`` holds the routes a module adds, from every record that
    names it (the core's task, directory and identity routes share ``/tasks/``). A route added
    twice is refused with an error naming both modules."""
    guard = LoopbackGuard(port=port, token=token.current, realm=CONTROL_REALM)
    app = web.Application(middlewares=[guard.middleware()])
    app[NODE_KEY] = node
    groups: dict[str, list[web.RouteDef]] = {}
    for group in node.plugins.collect("anet_routes", node=node, unique=_claims):
        groups.setdefault(group.module, []).extend(group.routes)
    for module, routes in groups.items():
        sub = web.Application(middlewares=[refusals])
        sub.add_routes(routes)
        app.add_subapp(f"/{module}/", sub)
    return app


@asynccontextmanager
async def control_plane(node: Node) -> AsyncIterator[None]:
    """Listen on loopback, publish the address in control_addr.txt, remove it on the way out."""
    paths = node.paths
    token = TokenFile(paths.control_token)
    token.ensure()
    sock = bind_loopback(0)
    port = sock.getsockname()[1]
    runner = web.AppRunner(build_app(node, port, token), access_log=None, logger=SERVER_LOG)
    await runner.setup()
    try:
        await web.SockSite(runner, sock).start()
        node.add_listener(Listener("control", f"127.0.0.1:{port}"))
        write_atomic(paths.control_addr, f"127.0.0.1:{port}\n".encode())
        log.info("event=control-listening address=127.0.0.1:%d", port)
        yield
    finally:
        paths.control_addr.unlink(missing_ok=True)
        await runner.cleanup()
