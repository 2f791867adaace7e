"""The running backends module: which backend takes which accepted task, and the start checks."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

from anet_backends import MODULE
from anet_backends.config import Backend, BackendsConfig
from anet_backends.forward import FAILED, FORWARDED, BackendTask, Count, Forwarder
from anet_backends.kinds import kind_for
from anet_backends.retry import RetryPlan
from anet_core.api import (
    AnetError,
    BackendKind,
    BackendOpener,
    InboundPolicy,
    InboundTask,
    NodeKey,
    NodeMetrics,
    TaskClaim,
)

log = logging.getLogger(__name__)


OPEN_POLICY_HINT = ("keep the inbound policy trusted (or closed), or remove accept_untrusted "
                    "from this backend")


def policy_conflict(config: BackendsConfig, policy: InboundPolicy) -> str | None:
    """Why ``policy`` cannot be the inbound policy with this configuration, or None: ``open``
    is refused while a backend forwards untrusted peers' tasks (it would let any stranger reach
    them without the operator's choice of backend)."""
    if policy is not InboundPolicy.OPEN:
        return None
    for index, backend in enumerate(config.backends):
        if backend.accept_untrusted:
            return (f"modules.backends.backends[{index}].accept_untrusted (match "
                    f"{backend.match!r}) forwards tasks of untrusted peers, which the inbound "
                    "policy open does not allow")
    return None


def check_policy(config: BackendsConfig, policy: InboundPolicy) -> None:
    """At start: refuse the inbound policy ``open`` while a backend forwards untrusted peers'
    tasks (the error names the backend and the key)."""
    conflict = policy_conflict(config, policy)
    if conflict is not None:
        raise AnetError("backends-open-policy", f"{conflict}; the inbound policy is open",
                        hint="remove accept_untrusted from this backend, or start the daemon "
                             "without it, run `anet policy set trusted`, and put it back")


def is_text_task(message: dict[str, Any]) -> bool:
    parts = message.get("parts") or []
    return bool(parts) and all(isinstance(part, dict) and "text" in part for part in parts)


class Backends:
    """The configured backends of a running node and the requester-task mapping they share."""

    def __init__(self, config: BackendsConfig, kinds: dict[str, BackendKind], count: Count,
                 *, idle_timeout_s: float, openers: dict[str, BackendOpener] | None = None
                 ) -> None:
        self.tasks: dict[str, BackendTask] = {}
        retry = RetryPlan.of(config.retry)
        self._backends: dict[str, tuple[Backend, Forwarder]] = {}
        for index, backend in enumerate(config.backends):
            kind = kind_for(index, backend, kinds)
            forwarder = Forwarder(backend.target(), kind, retry, count,
                                  idle_timeout_s=idle_timeout_s, tasks=self.tasks,
                                  open=(openers or {}).get(kind.name))
            self._backends[backend.match] = (backend, forwarder)

    @classmethod
    @asynccontextmanager
    async def running(cls, config: BackendsConfig, kinds: dict[str, BackendKind],
                      count: Count, *, idle_timeout_s: float) -> AsyncIterator[Backends]:
        """The service while the module runs, the configured backends' kinds open for it:
        their forwards share what a kind keeps between them (``BackendKind.pooled``)."""
        used = {kind.name: kind for kind in (kind_for(index, backend, kinds) for index, backend
                                             in enumerate(config.backends))}
        async with AsyncExitStack() as stack:
            openers = {name: await stack.enter_async_context(kind.pooled())
                       for name, kind in used.items() if kind.pooled is not None}
            yield cls(config, kinds, count, idle_timeout_s=idle_timeout_s, openers=openers)

    def claim(self, task: InboundTask, policy: InboundPolicy) -> TaskClaim | None:
        """The backend that serves ``task``, or None to leave it in the inbox.

        Only text tasks; a skill's own backend before ``*``; untrusted peers only for an
        ``accept_untrusted`` + ``toolless`` backend, and never while the policy is open (it
        may have been opened after the start check).
        """
        if not is_text_task(task.message):
            return None
        chosen = self._backends.get(task.skill or "") or self._backends.get("*")
        if chosen is None:
            return None
        backend, forwarder = chosen
        if not task.trusted:
            if not (backend.accept_untrusted and backend.toolless):
                return None
            if policy is InboundPolicy.OPEN:
                # accept_untrusted with the inbound policy open would serve anyone at all.
                log.warning("event=task-to-inbox task=%s from=%s backend=%s "
                            "reason=untrusted-under-open-policy", task.task_id, task.peer_aid,
                            backend.match)
                return None
        return TaskClaim(module=MODULE, serve=forwarder.serve)

    def skill_sources(self) -> dict[str, Callable[[], Awaitable[list[dict[str, Any]]]]]:
        """Per backend (by match), what the node's card lists for it: a ``*`` backend's own
        skills, a skill backend's skill as its card describes it (or by its id alone). A
        backend that cannot be read now offers nothing until the next publication."""
        def reader(match: str, forwarder: Forwarder) -> Callable[
                [], Awaitable[list[dict[str, Any]]]]:
            async def read() -> list[dict[str, Any]]:
                offered = await forwarder.skills()
                if match == "*":
                    return offered
                return [next((skill for skill in offered if skill["id"] == match),
                             {"id": match, "name": match})]
            return read

        return {match: reader(match, forwarder)
                for match, (_, forwarder) in self._backends.items()}

    @staticmethod
    def counting(metrics: NodeMetrics) -> Count:
        """Counts forwards and failures per backend for the node's metrics
        (``anet_backends_forwards_total``, ``anet_backends_failures_total``)."""
        forwards = metrics.counter("forwards", "Requester turns forwarded to a backend",
                                   ["backend"], module="backends")
        failures = metrics.counter("failures", "Tasks a backend failed after its retries",
                                   ["backend"], module="backends")
        counters = {FORWARDED: forwards, FAILED: failures}

        def count(kind: str, backend: str) -> None:
            counter = counters.get(kind)
            if counter is not None:
                counter.labels(backend).inc()

        return count


SERVICE = NodeKey("backends", Backends)
"""The started module on the running node."""
