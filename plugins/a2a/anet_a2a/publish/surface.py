"""The published surface's gate, its callers and the port of their tasks.

Discovery (the catalog, each alias's card) needs nothing. Every other route is an alias's task
route and passes, in this order: a token of ``anet publish token add`` (else 401, and no task
is created), the alias published and reached by that token (else 404), the token's rate limit
(else 429). Then the request checks every A2A listener of this module makes (media type, body
limit, version), and the task goes to the task layer as a local task of the principal
``<alias>/<token name>``: each token holder sees its own tasks on each alias and no others.
"""

from __future__ import annotations

import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from anet_a2a.checks import binding_of
from anet_a2a.endpoint import activate
from anet_a2a.operations import AgentOperations
from anet_a2a.publish.aliases import Aliases, PublishedAlias
from anet_a2a.publish.tokens import PublishToken, PublishTokens
from anet_a2a.replies import error_reply, json_reply
from anet_a2a.state import MODULE
from anet_a2a.tasks_port import a2a_error
from anet_core.api import (
    LocalOrigin,
    LocalTasks,
    Node,
    TaskError,
    TaskMetadata,
    TaskSubscription,
)
from anet_core.wire import A2AError, A2AErrorKind, AgentCard

REALM = "anet-publish"
CARD_ROUTE = "card"
"""Name prefix of the discovery routes, which need no token."""
RATE_WINDOW_S = 60.0
PUBLISH_ALIAS = TaskMetadata.PUBLISH_ALIAS
PUBLISH_TOKEN = TaskMetadata.PUBLISH_TOKEN


@dataclass(frozen=True)
class Caller:
    token: PublishToken
    alias: PublishedAlias

    def origin(self) -> LocalOrigin:
        return LocalOrigin(MODULE, f"{self.alias.name}/{self.token.name}",
                           {PUBLISH_ALIAS: self.alias.name, PUBLISH_TOKEN: self.token.name})


CALLER = web.RequestKey("a2a-publish-caller", Caller)


@dataclass
class RateLimit:
    """At most ``per_minute`` task requests per token in any 60 seconds."""

    per_minute: int
    _seen: defaultdict[str, deque[float]] = field(default_factory=lambda: defaultdict(deque))

    def wait(self, name: str, now: float | None = None) -> float:
        """0 when the request may go on (and counts), else the seconds until it may."""
        now = time.monotonic() if now is None else now
        seen = self._seen[name]
        while seen and now - seen[0] >= RATE_WINDOW_S:
            seen.popleft()
        if len(seen) >= self.per_minute:
            return RATE_WINDOW_S - (now - seen[0])
        seen.append(now)
        return 0.0


def _bearer(request: web.Request) -> str:
    scheme, _, value = request.headers.get("Authorization", "").partition(" ")
    return value.strip() if scheme.lower() == "bearer" else ""


def _unauthorized() -> web.Response:
    return json_reply({"error": "Unauthorized: send Authorization: Bearer <token>, a token from "
                                "`anet publish token add` on the publishing node"}, status=401,
                      headers={"WWW-Authenticate": f'Bearer realm="{REALM}"'})


def not_published(alias: str) -> web.Response:
    return json_reply({"error": f"No published agent is called {alias[:80]!r}; "
                                "/.well-known/agents-card.json lists them"}, status=404)


@dataclass(frozen=True)
class PublishedTasks:
    """The port of one caller's tasks on one alias (see ``tasks_port.TasksPort``)."""

    alias: PublishedAlias
    tasks: LocalTasks

    async def send(self, message: dict[str, Any], metadata: dict[str, Any] | None = None, *,
                   blocking: bool = False) -> dict[str, Any]:
        try:
            return await self.tasks.send(message, metadata=metadata, skill=self.alias.skill,
                                         offer=self.alias.offer, blocking=blocking)
        except TaskError as error:
            raise a2a_error(self.alias.name, error) from None

    def get(self, task_id: str) -> dict[str, Any]:
        try:
            return self.tasks.get(task_id)
        except TaskError as error:
            raise a2a_error(self.alias.name, error) from None

    def list(self, **query: Any) -> dict[str, Any]:
        try:
            return self.tasks.list(**query)
        except TaskError as error:
            raise a2a_error(self.alias.name, error) from None

    async def cancel(self, task_id: str) -> dict[str, Any]:
        try:
            return await self.tasks.cancel(task_id)
        except TaskError as error:
            raise a2a_error(self.alias.name, error) from None

    def subscribe(self, task_id: str) -> TaskSubscription:
        try:
            return self.tasks.subscribe(task_id)
        except TaskError as error:
            raise a2a_error(self.alias.name, error) from None


@dataclass
class PublishedSurface:
    """The published listener's :class:`~anet_a2a.surface.Surface` and gate."""

    node: Node
    aliases: Aliases
    tokens: PublishTokens
    limit: RateLimit
    base: str = ""
    rejected_status: int = 400  # ZeroClaw's answer to a body that is not JSON-RPC
    push_refusal: str = ("Push notifications are not supported by this node's published "
                         "agents: follow a task with SubscribeToTask or GetTask")

    async def gate(self, request: web.Request) -> web.StreamResponse | None:
        route = request.match_info.route.name or ""
        if request.match_info.http_exception is not None or route.startswith(CARD_ROUTE):
            return None  # discovery is public; an unknown path is the router's 404
        token = self.tokens.match(_bearer(request))
        if token is None:
            return _unauthorized()
        name = request.match_info.get("alias", "")
        alias = await self.aliases.alias(name)
        if alias is None or not token.reaches(name):
            return not_published(name)
        wait = self.limit.wait(token.name)
        if wait:
            reply = error_reply(binding_of(request), A2AError(
                A2AErrorKind.INVALID_REQUEST,
                f"The token {token.name!r} made more than {self.limit.per_minute} task requests "
                f"in a minute; try again in {wait:.0f} s"), status=429)
            reply.headers["Retry-After"] = str(max(1, round(wait)))
            return reply
        request[CALLER] = Caller(token, alias)
        return None

    async def operations(self, request: web.Request) -> AgentOperations:
        caller = request[CALLER]
        port = PublishedTasks(caller.alias, self.node.tasks.local(caller.origin()))
        return AgentOperations(tasks=port, extensions=activate(request, []))

    async def extended_card(self, request: web.Request) -> AgentCard:
        raise A2AError(A2AErrorKind.UNSUPPORTED_OPERATION,
                       "This agent has no extended card (capabilities.extendedAgentCard is "
                       "false)")

