"""``anet doctor``: one check per configured backend."""

from __future__ import annotations

import asyncio
import re
from functools import partial

from anet_backends import MODULE
from anet_backends.config import Backend, BackendsConfig
from anet_backends.kinds import installed_kinds
from anet_backends.retry import retry_warning
from anet_core.api import (
    AnetError,
    BackendKind,
    CheckContext,
    CheckResult,
    CheckStatus,
    DoctorCheck,
    format_duration,
)

PROBE_TIMEOUT_S = 8.0
"""Each backend's probe; below the check's own timeout so one hung backend shows as such."""
CHECK_TIMEOUT_S = 10.0


async def probe(backend: Backend, kinds: dict[str, BackendKind]) -> CheckResult:
    kind = kinds.get(backend.target().scheme)
    if kind is None:
        return CheckResult(CheckStatus.FAIL, f"no installed backend kind takes {backend.url!r}",
                           hint="install the module that provides this kind")
    if kind.diagnose is None:
        return CheckResult(CheckStatus.SKIP, f"the kind {kind.name} has no checks")
    try:
        return await asyncio.wait_for(kind.diagnose(backend.target()), PROBE_TIMEOUT_S)
    except TimeoutError:
        return CheckResult(CheckStatus.FAIL, f"no answer within {PROBE_TIMEOUT_S:g} s",
                           hint="the backend hangs: restart it")


def backend_checks(config: BackendsConfig | None) -> list[DoctorCheck]:
    """One check per configured backend, named after its match (``backend-any`` for "*")."""
    if config is None or not config.backends:
        return [DoctorCheck("backends", MODULE, "the backends configured, if any",
                            no_backend, timeout=CHECK_TIMEOUT_S)]
    names: set[str] = {"backends-retry"}
    checks = [DoctorCheck("backends-retry", MODULE, "retry.give_up_after stays below the "
                          "requesters' no_response_after", retry_bounds, timeout=CHECK_TIMEOUT_S)]
    for index, backend in enumerate(config.backends):
        name = check_name(backend.match, names)
        names.add(name)
        checks.append(DoctorCheck(
            name, MODULE, f"backend {backend.match!r} ({backend.url}): reachable, card readable, "
            "socket path trusted, listener the expected account",
            partial(probe_configured, index), timeout=CHECK_TIMEOUT_S))
    return checks


def check_name(match: str, taken: set[str]) -> str:
    slug = "any" if match == "*" else re.sub(r"[^a-z0-9]+", "-", match.lower()).strip("-")
    name = f"backend-{slug or 'skill'}"
    suffix = 2
    while name in taken:
        name, suffix = f"backend-{slug or 'skill'}-{suffix}", suffix + 1
    return name


async def retry_bounds(ctx: CheckContext) -> CheckResult:
    retry = ctx.config.module(MODULE, BackendsConfig).retry
    warning = retry_warning(retry)
    if warning is not None:
        return CheckResult(CheckStatus.WARN, warning,
                           hint="set modules.backends.retry.give_up_after to 10m (the default)")
    return CheckResult(CheckStatus.OK, f"forwards give up after "
                       f"{format_duration(retry.give_up_after)}, waiting at most "
                       f"{format_duration(retry.max_interval)} between attempts")


async def no_backend(ctx: CheckContext) -> CheckResult:
    ctx.config.module(MODULE, BackendsConfig)  # an invalid block fails here, with its message
    return CheckResult(CheckStatus.OK, "no backend configured: accepted tasks wait in the "
                       "inbox for the operator")


async def probe_configured(index: int, ctx: CheckContext) -> CheckResult:
    backend = ctx.config.module(MODULE, BackendsConfig).backends[index]
    try:
        kinds = installed_kinds(ctx.plugins)
    except AnetError as error:
        return CheckResult(CheckStatus.FAIL, error.message, hint=error.hint)
    return await probe(backend, kinds)
