"""What the two A2A listeners of the module differ in, behind one set of binding handlers.

The local endpoint (loopback, the network's agents and direct peers) and the published surface
(this node's aliases, for other deployments) answer the same JSON-RPC and HTTP+JSON bindings
(``jsonrpc``, ``rest``); each resolves the agent of a request, its operations and cards itself.
"""

from __future__ import annotations

from typing import Protocol

from aiohttp import web

from anet_a2a.operations import AgentOperations
from anet_core.wire import AgentCard


class Surface(Protocol):
    rejected_status: int
    """HTTP status of an answer to a body that is not a JSON-RPC request: 200 as the A2A
    binding says, or 400 where peers expect it (ZeroClaw's published surface)."""
    push_refusal: str
    """The message of PushNotificationNotSupportedError on this surface."""

    async def operations(self, request: web.Request) -> AgentOperations:
        """The operations of the request's agent; A2AError when there is no such agent."""

    async def extended_card(self, request: web.Request) -> AgentCard:
        """GetExtendedAgentCard; A2AError when the surface has none."""


SURFACE = web.AppKey("a2a-surface", Surface)
