"""The text agent as a Starlette app, and as a server on a unix socket or a loopback port."""

from __future__ import annotations

import asyncio
from pathlib import Path

from starlette.applications import Starlette

from examples.agent_server import UNIX_SOCKET_BASE_URL, build_a2a_app, serve_agent
from examples.text_agent.card import build_card
from examples.text_agent.executor import TextAgentExecutor


def build_app(token: str | None, base_url: str = UNIX_SOCKET_BASE_URL) -> Starlette:
    """The agent's app; ``token`` (if any) is required on every request, the card included.

    ``base_url`` is where clients reach the app; the card's interface URLs are built from it.
    """
    card = build_card(base_url, requires_token=token is not None)
    return build_a2a_app(card, TextAgentExecutor(), token)


async def serve(*, socket_path: str | Path | None = None, port: int | None = None,
                token_file: str | Path | None = None,
                ready: asyncio.Future[str] | None = None) -> None:
    """Serve until cancelled on a unix socket or on 127.0.0.1:``port`` (exactly one of them).

    ``ready`` receives the base URL for clients once the listener is bound.
    """
    await serve_agent(build_app, socket_path=socket_path, port=port, token_file=token_file,
                      ready=ready)
