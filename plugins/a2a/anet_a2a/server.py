"""The listener: its application, and its life as a lifespan of the node.

The recorded port is bound again on every start. When another process holds it, the interface
stays down (the rest of the node runs): clients configured with this address would otherwise
send the token to that process.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from aiohttp import web

from anet_a2a import AGENTS_PATH, directory, jsonrpc, rest
from anet_a2a.checks import BODY_LIMIT, JSONRPC_ROUTE, REALM, RequestChecks, loopback_gate
from anet_a2a.endpoint import ENDPOINT, Endpoint, name_activated
from anet_a2a.portholder import find_holder
from anet_a2a.state import (
    HOST,
    MODULE,
    StateDir,
    choose_port,
    conflict_text,
    replace_token_after_emergency,
)
from anet_a2a.surface import SURFACE
from anet_core.api import NODE_KEY, SERVER_LOG, Listener, LoopbackGuard, Node, bind_loopback
from anet_core.wire import AGENT_CARD_WELL_KNOWN_PATH

log = logging.getLogger(__name__)

BODY_TIMEOUT_S = 30.0
HEADER_TIMEOUT_S = 30.0
"""A connection must complete a request's headers within this long of opening (or of the
previous response): aiohttp's keep-alive timer, which also closes slow-header (slowloris)
connections. Bodies have BODY_TIMEOUT_S in the request checks."""
SHUTDOWN_TIMEOUT_S = 2.0
"""Open streams are cut after this long at shutdown; their clients resubscribe after a restart."""


def build_app(endpoint: Endpoint, *, body_timeout: float = BODY_TIMEOUT_S) -> web.Application:
    guard = LoopbackGuard(port=endpoint.port, token=endpoint.token.current, realm=REALM)
    checks = RequestChecks(loopback_gate(guard), body_timeout)
    app = web.Application(middlewares=[checks.middleware()], client_max_size=BODY_LIMIT)
    app[ENDPOINT] = endpoint
    app[SURFACE] = endpoint
    app[NODE_KEY] = endpoint.node
    app.on_response_prepare.append(name_activated)
    agent = f"{AGENTS_PATH}/{{aid}}"
    app.add_routes([
        web.get(AGENTS_PATH, directory.list_agents, allow_head=False),
        web.get(agent, directory.agent_card, allow_head=False),
        web.get(agent + AGENT_CARD_WELL_KNOWN_PATH, directory.agent_card, allow_head=False),
        web.post(f"{agent}/jsonrpc", jsonrpc.handle, name=JSONRPC_ROUTE),
        web.post(f"{agent}/jsonrpc/", jsonrpc.handle, name=f"{JSONRPC_ROUTE}-slash"),
        *rest.routes(f"{agent}/rest"),
    ])
    return app


def _bind(node: Node, state: StateDir) -> socket.socket | None:
    """The listening socket on the recorded port (chosen now on the first start), or None when
    another process holds it: then the conflict is recorded and the token replaced if the
    holder may be another user."""
    token = state.token()
    port = state.recorded_port()
    if port is None:
        sock = choose_port()
        state.record_port(sock.getsockname()[1])
        token.replace()  # a new address gets a new token
        return sock
    try:
        sock = bind_loopback(port)
    except OSError:
        holder = find_holder(port)
        replaced = holder.may_be_another_user
        if replaced:
            token.replace()
        text = conflict_text(port, holder.describe(), replaced)
        state.record_conflict(text)
        log.error("event=a2a-down reason=port-conflict detail=%r", text.splitlines()[0])
        node.add_listener(Listener(MODULE, f"{HOST}:{port}", state="down",
                                   detail=f"port conflict: {text.splitlines()[0]}; free the "
                                          "port, then `anet stop && anet up` and "
                                          "`anet agents wire --refresh`"))
        return None
    token.ensure()
    state.clear_conflict()
    return sock


@asynccontextmanager
async def local_a2a(node: Node) -> AsyncIterator[None]:
    """Serve the local A2A endpoint for as long as the node runs."""
    state = StateDir.of(node.paths)
    if replace_token_after_emergency(state, node.identity):
        log.warning("event=a2a-token-replaced reason=emergency-rotation")
    sock = _bind(node, state)
    if sock is None:
        yield
        return
    port = sock.getsockname()[1]
    endpoint = Endpoint(node=node, port=port, token=state.token())
    runner = web.AppRunner(build_app(endpoint), access_log=None, handler_cancellation=True,
                           shutdown_timeout=SHUTDOWN_TIMEOUT_S,
                           keepalive_timeout=HEADER_TIMEOUT_S, logger=SERVER_LOG)
    await runner.setup()
    try:
        await web.SockSite(runner, sock).start()
        node.add_listener(Listener(MODULE, f"{HOST}:{port}"))
        log.info("event=a2a-listening address=%s:%d", HOST, port)
        yield
    finally:
        await runner.cleanup()
        sock.close()  # already closed by the site unless starting it failed
