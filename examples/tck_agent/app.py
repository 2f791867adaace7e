"""The TCK scenario agent as a Starlette app, and as a server on a unix socket or loopback port."""

from __future__ import annotations

import asyncio
from pathlib import Path

from a2a.types import AgentCapabilities, AgentCard, AgentSkill
from starlette.applications import Starlette

from examples.agent_server import (
    UNIX_SOCKET_BASE_URL,
    build_a2a_app,
    declare_bearer_auth,
    interfaces_for,
    serve_agent,
)
from examples.tck_agent.scenarios import RESUBSCRIBE_HOLD_S, TckScenarioExecutor


def build_card(base_url: str, requires_token: bool) -> AgentCard:
    card = AgentCard(
        name="TCK Scenario Agent",
        description=("Behaves as the A2A TCK expects of its system under test, selected by the "
                     "messageId prefix; any other message completes with an echo."),
        version="1.0.0",
        supported_interfaces=interfaces_for(base_url),
        capabilities=AgentCapabilities(streaming=True, push_notifications=False,
                                       extended_agent_card=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain", "application/json"],
        skills=[AgentSkill(
            id="tck-scenarios", name="TCK scenarios",
            description="Completes, asks for input, rejects, streams or returns artifacts on cue.",
            tags=["tck", "conformance", "echo"],
            examples=["any text, with messageId tck-complete-task-1"])],
    )
    if requires_token:
        declare_bearer_auth(card)
    return card


def build_app(token: str | None, base_url: str = UNIX_SOCKET_BASE_URL,
              resubscribe_hold_s: float = RESUBSCRIBE_HOLD_S) -> Starlette:
    """The agent's app; ``token`` (if any) is required on every request, the card included."""
    card = build_card(base_url, requires_token=token is not None)
    return build_a2a_app(card, TckScenarioExecutor(resubscribe_hold_s), token)


async def serve(*, socket_path: str | Path | None = None, port: int | None = None,
                token_file: str | Path | None = None,
                ready: asyncio.Future[str] | None = None) -> None:
    """Serve until cancelled on a unix socket or on 127.0.0.1:``port`` (exactly one of them).

    ``ready`` receives the base URL for clients once the listener is bound.
    """
    await serve_agent(build_app, socket_path=socket_path, port=port, token_file=token_file,
                      ready=ready)
