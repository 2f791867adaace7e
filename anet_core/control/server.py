"""The control plane server: one sub-application per module, behind the control token."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web

from anet_core.control.guard import LoopbackGuard, TokenFile, bind_loopback
from anet_core.node import NODE_KEY, Listener, Node
from anet_core.util.fsutil import write_atomic

CONTROL_REALM = "anet-control"

log = logging.getLogger(__name__)


def build_app(node: Node, port: int, token: TokenFile) -> web.Application:
    guard = LoopbackGuard(port=port, token=token.current, realm=CONTROL_REALM)
    app = web.Application(middlewares=[guard.middleware()])
    app[NODE_KEY] = node
    for group in node.plugins.collect("anet_routes", node=node,
                                      unique=lambda group: [f"the routes /{group.module}/"]):
        sub = web.Application()
        sub.add_routes(group.routes)
        app.add_subapp(f"/{group.module}/", sub)
    return app


@asynccontextmanager
async def control_plane(node: Node) -> AsyncIterator[None]:
    """Listen on loopback, publish the address in control_addr.txt, remove it on the way out."""
    paths = node.paths
    token = TokenFile(paths.control_token)
    token.ensure()
    sock = bind_loopback(0)
    port = sock.getsockname()[1]
    runner = web.AppRunner(build_app(node, port, token), access_log=None)
    await runner.setup()
    try:
        await web.SockSite(runner, sock).start()
        node.add_listener(Listener("control", f"127.0.0.1:{port}"))
        write_atomic(paths.control_addr, f"127.0.0.1:{port}\n".encode())
        log.info("control plane listening on 127.0.0.1:%d", port)
        yield
    finally:
        paths.control_addr.unlink(missing_ok=True)
        await runner.cleanup()
