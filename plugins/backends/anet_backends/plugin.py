"""Hook implementations of the module backends.

Each hook imports the code it runs, so that loading this module (every command of ``anet`` does)
loads none of the module's code; a node with backends loads it when it starts them.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING

from anet_backends import MODULE
from anet_core.api import (
    BackendKind,
    ConfigBlock,
    DoctorCheck,
    Lifespan,
    PolicyVeto,
    SkillSource,
    TaskClaim,
    hookimpl,
)

if TYPE_CHECKING:
    from anet_core.api import Config, InboundPolicy, InboundTask, Node

log = logging.getLogger(__name__)


@hookimpl
def anet_config_blocks() -> list[ConfigBlock]:
    from anet_backends.config import BackendsConfig

    # The keys are accepted inside modules.a2a too (docs/configuration.md); they belong here.
    return [ConfigBlock(module=MODULE, model=BackendsConfig, also_read_from=("a2a",))]


@hookimpl
def anet_backend_kinds() -> list[BackendKind]:
    from anet_backends.a2a_kind import A2A_KIND

    return [A2A_KIND]


@hookimpl
def anet_lifespan(node: Node) -> list[Lifespan]:
    @asynccontextmanager
    async def backends() -> AsyncIterator[None]:
        from anet_backends.config import BackendsConfig
        from anet_backends.kinds import installed_kinds
        from anet_backends.retry import retry_warning
        from anet_backends.service import SERVICE, Backends, check_policy

        config = node.config.module(MODULE, BackendsConfig)
        if not config.backends:
            yield
            return
        check_policy(config, node.tasks.policy)
        if (warning := retry_warning(config.retry)) is not None:
            log.warning("event=backends-retry-too-long detail=%r", warning)
        count = Backends.counting(node.metrics)
        async with Backends.running(
                config, installed_kinds(node.plugins), count,
                idle_timeout_s=node.config.node.no_response_after.total_seconds()) as service:
            node[SERVICE] = service
            try:
                yield
            finally:
                del node[SERVICE]

    return [Lifespan(name="backends", open=backends, module="backends")]


@hookimpl
def anet_take_task(node: Node, task: InboundTask) -> TaskClaim | None:
    from anet_backends.service import SERVICE

    service = node.get(SERVICE)
    return None if service is None else service.claim(task, node.tasks.policy)


@hookimpl
def anet_card_skills(node: Node) -> list[SkillSource]:
    from anet_backends.service import SERVICE

    service = node.get(SERVICE)
    if service is None:
        return []
    return [SkillSource(module=MODULE, read=read, backend=match)
            for match, read in service.skill_sources().items()]


@hookimpl
def anet_policy_veto(node: Node, policy: InboundPolicy) -> PolicyVeto | None:
    from anet_backends.config import BackendsConfig
    from anet_backends.service import OPEN_POLICY_HINT, policy_conflict

    conflict = policy_conflict(node.config.module(MODULE, BackendsConfig), policy)
    return None if conflict is None else PolicyVeto(module=MODULE, reason=conflict,
                                                    hint=OPEN_POLICY_HINT)


@hookimpl
def anet_doctor_checks(config: Config | None) -> list[DoctorCheck]:
    from anet_backends.config import BackendsConfig
    from anet_backends.doctor import backend_checks

    return backend_checks(None if config is None else config.module(MODULE, BackendsConfig))
