"""Backend kinds (``anet_backend_kinds``): the ways the backends module reaches a configured
backend, the channel a kind opens to one, and how far a forward got when it failed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from anet_core.records.host import CheckResult


@dataclass(frozen=True)
class BackendTarget:
    """One configured backend as a backend kind sees it: the keys of ``modules.backends``.

    ``expected_user`` is a user name or a uid; ``peer_check`` is "full" or "path-only".
    """

    match: str
    url: str
    token_file: str | None = None
    expected_user: str | int | None = None
    socket_group: str | None = None
    peer_check: str = "full"
    allow_tcp: bool = False

    @property
    def scheme(self) -> str:
        return self.url.partition(":")[0].lower()


class BackendStage(StrEnum):
    """How far a forward got when it failed; the backends module decides from it what to do."""

    REFUSED = "refused"
    """A check failed before anything was written: the task stays in the inbox."""
    UNREACHABLE = "unreachable"
    """Failed before the backend could have taken the message: retried with backoff."""
    BUSY = "busy"
    """The message was written and the backend said it did not take it (HTTP 503): retried."""
    WRITTEN = "written"
    """Failed after the message was written: never retried, it could run twice."""


class BackendError(Exception):
    """A backend kind's report that a forward did not work, and how far it got."""

    def __init__(self, stage: BackendStage, reason: str) -> None:
        super().__init__(reason)
        self.stage = stage
        self.reason = reason


class BackendChannel(Protocol):
    """A connection to one backend, open for the turns of one task.

    ``send`` forwards an A2A message (wire JSON) with the request ``metadata`` and yields the
    backend's answers as A2A StreamResponse objects (``{"task": ...}``, ``{"message": ...}``,
    ``{"statusUpdate": ...}``, ``{"artifactUpdate": ...}``) until the turn ends; with
    ``blocking`` (the requester waits for the end only:
    :attr:`~anet_core.records.tasks.InboundTask.blocking`) it may yield the end alone. ``cancel``
    cancels a backend task. Both raise :class:`BackendError`.
    """

    def send(self, message: dict[str, Any], metadata: dict[str, Any], *,
             blocking: bool = False) -> AsyncIterator[dict[str, Any]]: ...

    async def cancel(self, task_id: str) -> None: ...


BackendOpener = Callable[[BackendTarget], AbstractAsyncContextManager[BackendChannel]]
"""Checks and connects one backend; the context yields a :class:`BackendChannel`."""


@dataclass(frozen=True)
class BackendKind:
    """A way to reach backends whose ``url`` has one of ``schemes``.

    ``open(target)`` returns an async context manager that checks and connects the backend and
    yields a :class:`BackendChannel` (raising :class:`BackendError` when it cannot);
    ``diagnose(target)``, when given, is what ``anet doctor`` reports for such a backend;
    ``skills(target)``, when given, what the node's network card lists for it.
    """

    name: str
    schemes: tuple[str, ...]
    open: BackendOpener
    diagnose: Callable[[BackendTarget], Awaitable[CheckResult]] | None = None
    skills: Callable[[BackendTarget], Awaitable[list[dict[str, Any]]]] | None = None
    """The skills such a backend offers (from its agent card), for the node's network card."""
    pooled: Callable[[], AbstractAsyncContextManager[BackendOpener]] | None = None
    """Entered while the backends module runs, when given: it yields the opener the forwards
    use instead of ``open``, whose channels share what the kind keeps between them (for the
    ``a2a`` kind, each backend's HTTP connections), closed when the module stops."""
    module: str = field(kw_only=True)

