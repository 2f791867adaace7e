"""``anet doctor``: one line per configured backend, in the detail of the check ``backends``."""

from __future__ import annotations

import asyncio

import pluggy

from anet_backends.config import Backend, BackendsConfig
from anet_backends.service import MODULE, kinds_by_scheme
from anet_core.doctor import CheckContext
from anet_core.errors import AnetError
from anet_core.records import BackendKind, CheckResult, CheckStatus

PROBE_TIMEOUT_S = 8.0
"""Each backend's probe; below the check's own timeout so one hung backend shows as such."""
CHECK_TIMEOUT_S = 10.0
_SEVERITY = [CheckStatus.OK, CheckStatus.SKIP, CheckStatus.WARN, CheckStatus.FAIL]


def declared_kinds(pm: pluggy.PluginManager) -> list[tuple[str, BackendKind]]:
    """Every backend kind with the module that declared it."""
    return [(impl.plugin_name, kind) for impl in pm.hook.anet_backend_kinds.get_hookimpls()
            for kind in impl.function() or ()]


async def probe(index: int, backend: Backend, kinds: dict[str, BackendKind]) -> CheckResult:
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


async def backends_check(ctx: CheckContext) -> CheckResult:
    config = ctx.config.module(MODULE, BackendsConfig)
    if not config.backends:
        return CheckResult(CheckStatus.OK, "no backend configured: accepted tasks wait in the "
                           "inbox for the operator")
    try:
        kinds = kinds_by_scheme(declared_kinds(ctx.plugins.pm))
    except AnetError as error:
        return CheckResult(CheckStatus.FAIL, error.message, hint=error.hint)
    results = await asyncio.gather(*(probe(index, backend, kinds)
                                     for index, backend in enumerate(config.backends)))
    worst = max((result.status for result in results), key=_SEVERITY.index)
    pairs = list(zip(config.backends, results, strict=True))
    detail = "\n".join(f"{backend.match} → {backend.url}: {result.status.value}: "
                       f"{result.summary}" for backend, result in pairs)
    hints = [f"{backend.match}: {result.hint}" for backend, result in pairs if result.hint]
    bad = sum(result.status in {CheckStatus.WARN, CheckStatus.FAIL} for result in results)
    summary = (f"{len(results)} backend(s) checked"
               + (f", {bad} with a problem" if bad else ", all fine"))
    return CheckResult(worst, summary, detail=detail, hint="; ".join(hints))
