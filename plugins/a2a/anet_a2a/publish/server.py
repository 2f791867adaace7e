"""The published listener: a listener of its own (never the loopback client listener), up only
while ``modules.a2a.publish.enabled`` is set.

Routes::

    GET  /.well-known/agents-card.json             the catalog (also below /a2a)
    GET  /a2a/{alias}/.well-known/agent-card.json  the alias's card (also a bare GET /a2a/{alias})
    POST /a2a/{alias}                              JSON-RPC (also with a trailing slash)
    any  /a2a/{alias}/rest/...                     HTTP+JSON

A listener that cannot bind leaves publishing down (logged, shown by ``anet status`` and
``anet doctor``); the rest of the node runs.
"""

from __future__ import annotations

import asyncio
import logging
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress

from aiohttp import web

from anet_a2a import jsonrpc, rest
from anet_a2a.card import signed
from anet_a2a.checks import JSONRPC_ROUTE, RequestChecks
from anet_a2a.config import A2AConfig, PublishConfig
from anet_a2a.endpoint import name_activated
from anet_a2a.publish.aliases import SKILLS_TTL_S, Aliases
from anet_a2a.publish.cards import (
    ALIAS_PREFIX,
    CATALOG_PATH,
    alias_card,
    catalog_card,
    published_base,
)
from anet_a2a.publish.surface import CARD_ROUTE, PublishedSurface, RateLimit, not_published
from anet_a2a.publish.tokens import PublishTokens
from anet_a2a.replies import json_reply
from anet_a2a.state import MODULE, StateDir
from anet_a2a.surface import SURFACE
from anet_core.api import SERVER_LOG, Listener, Node, NodeKey
from anet_core.wire import AGENT_CARD_WELL_KNOWN_PATH

log = logging.getLogger(__name__)

LISTENER = "a2a-publish"
BODY_LIMIT = 1024 * 1024
"""Larger bodies are answered 413: a public listener takes no more than a task needs."""
BODY_TIMEOUT_S = 30.0
HEADER_TIMEOUT_S = 30.0
SHUTDOWN_TIMEOUT_S = 2.0
CARD_MAX_AGE_S = 60
REPORT_DELAY_S = 2.0
"""The aliases are first resolved this long after the start, once the modules that serve them
run, and their problems logged; then each time they change."""

PUBLISHED = NodeKey("a2a-published", PublishedSurface)
PUBLISHED_APP = web.AppKey("a2a-published", PublishedSurface)


def _card_reply(card: dict[str, object]) -> web.Response:
    return json_reply(card, headers={"Cache-Control": f"public, max-age={CARD_MAX_AGE_S}"})


async def catalog(request: web.Request) -> web.StreamResponse:
    surface = request.config_dict[PUBLISHED_APP]
    aliases = list((await surface.aliases.state()).published.values())
    return _card_reply(signed(catalog_card(surface.base, aliases), surface.node.identity).wire())


async def card(request: web.Request) -> web.StreamResponse:
    surface = request.config_dict[PUBLISHED_APP]
    name = request.match_info["alias"]
    alias = await surface.aliases.alias(name)
    if alias is None:
        return not_published(name)
    return _card_reply(signed(alias_card(surface.base, alias), surface.node.identity).wire())


def build_app(surface: PublishedSurface, *, body_timeout: float = BODY_TIMEOUT_S
              ) -> web.Application:
    checks = RequestChecks(surface.gate, body_timeout, body_limit=BODY_LIMIT)
    app = web.Application(middlewares=[checks.middleware()], client_max_size=BODY_LIMIT)
    app[SURFACE] = surface
    app[PUBLISHED_APP] = surface
    app.on_response_prepare.append(name_activated)
    alias = f"{ALIAS_PREFIX}/{{alias}}"
    app.add_routes([
        web.get(CATALOG_PATH, catalog, name=f"{CARD_ROUTE}-catalog", allow_head=False),
        web.get(ALIAS_PREFIX + CATALOG_PATH, catalog, name=f"{CARD_ROUTE}-catalog-a2a",
                allow_head=False),
        web.get(alias + AGENT_CARD_WELL_KNOWN_PATH, card, name=f"{CARD_ROUTE}-alias",
                allow_head=False),
        # A bare GET of an interface URL answers as A2A does: with the agent's card.
        web.get(alias, card, name=f"{CARD_ROUTE}-alias-bare", allow_head=False),
        web.post(alias, jsonrpc.handle, name=JSONRPC_ROUTE),
        web.post(f"{alias}/", jsonrpc.handle, name=f"{JSONRPC_ROUTE}-slash"),
        *rest.routes(f"{alias}/rest"),
    ])
    return app


def _bind(config: PublishConfig) -> socket.socket:
    family = socket.AF_INET6 if ":" in config.bind else socket.AF_INET
    return socket.create_server((config.bind, config.port), family=family, reuse_port=False)


async def _report(surface: PublishedSurface) -> None:
    """Log the aliases' problems at the start and whenever they change."""
    await asyncio.sleep(REPORT_DELAY_S)
    logged: list[str] | None = None
    while True:
        state = await surface.aliases.state()
        if state.problems != logged:
            for problem in state.problems:
                log.warning("event=a2a-publish-problem detail=%r", problem)
            log.info("event=a2a-publish-aliases count=%d base=%s aliases=%s",
                     len(state.published), surface.base, ",".join(sorted(state.published)))
            logged = state.problems
        await asyncio.sleep(SKILLS_TTL_S)


@asynccontextmanager
async def published_surface(node: Node) -> AsyncIterator[None]:
    """The published listener while the node runs, when ``publish.enabled`` is set."""
    config = node.config.module(MODULE, A2AConfig).publish
    if not config.enabled:
        yield
        return
    surface = PublishedSurface(node=node, aliases=Aliases(node, config),
                               tokens=PublishTokens(StateDir.of(node.paths).publish_tokens_file),
                               limit=RateLimit(config.rate_limit_per_minute))
    try:
        sock = _bind(config)
    except OSError as error:
        log.error("event=a2a-publish-down address=%s:%d detail=%r", config.bind, config.port,
                  error)
        node.add_listener(Listener(LISTENER, f"{config.bind}:{config.port}", state="down",
                                   detail=f"cannot bind: {error}"))
        yield
        return
    host, port = sock.getsockname()[:2]
    surface.base = published_base(config.public_base_url, config.advertise_host,
                                  config.advertise_port, host, port)
    runner = web.AppRunner(build_app(surface), access_log=None, handler_cancellation=True,
                           shutdown_timeout=SHUTDOWN_TIMEOUT_S,
                           keepalive_timeout=HEADER_TIMEOUT_S, logger=SERVER_LOG)
    await runner.setup()
    report = None
    try:
        await web.SockSite(runner, sock).start()
        node.add_listener(Listener(LISTENER, f"{host}:{port}", detail=surface.base))
        node[PUBLISHED] = surface
        log.info("event=a2a-publish-listening address=%s:%d catalog=%s%s", host, port,
                 surface.base, CATALOG_PATH)
        report = asyncio.ensure_future(_report(surface))
        yield
    finally:
        if report is not None:
            report.cancel()
            with suppress(asyncio.CancelledError):
                await report
        node.module_state.pop(PUBLISHED, None)
        await runner.cleanup()
        sock.close()
