"""The doctor: runs every module's checks concurrently, each with a timeout and isolation."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property
from typing import TYPE_CHECKING, Any

from anet_core.cli.context import CliContext
from anet_core.control.client import ControlClient
from anet_core.daemon import running_pid
from anet_core.errors import AnetError
from anet_core.plugins import Plugins
from anet_core.records import CheckResult, CheckStatus, DoctorCheck

if TYPE_CHECKING:
    from anet_core.config import Config

log = logging.getLogger(__name__)


STATUS_TIMEOUT_S = 5.0
"""How long the doctor waits for the daemon's status; a check that needs it fails after that."""


@dataclass
class CheckContext(CliContext):
    """What a check may look at. ``config`` raises :class:`AnetError` when config.json is bad."""

    _status: asyncio.Future[dict[str, Any]] | None = field(default=None, init=False, repr=False)

    @cached_property
    def daemon_pid(self) -> int | None:
        return running_pid(self.paths)

    async def daemon_status(self) -> dict[str, Any] | None:
        """The running daemon's status, or None when it is not running.

        Read once per doctor run, in a worker thread: a daemon that does not answer makes the
        checks that await this fail (daemon-unreachable, or their own timeout), while the event
        loop, and so every other check, runs on. Raises :class:`AnetError` when it cannot be read.
        """
        if self.daemon_pid is None:
            return None
        if self._status is None:
            client = ControlClient(self.paths, timeout=STATUS_TIMEOUT_S)
            self._status = asyncio.ensure_future(asyncio.to_thread(client.get, "/core/status"))
            # Retrieved here too, so a read that only timed-out checks awaited logs nothing.
            self._status.add_done_callback(lambda read: read.cancelled() or read.exception())
        # One check timing out must not cancel the read the other checks await.
        return await asyncio.shield(self._status)


@dataclass(frozen=True)
class Outcome:
    check: DoctorCheck
    result: CheckResult
    seconds: float

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.check.name, "module": self.check.module,
                "status": self.result.status.value, "summary": self.result.summary,
                "detail": self.result.detail, "hint": self.result.hint,
                "seconds": round(self.seconds, 3)}


def all_checks(plugins: Plugins, config: Config | None = None) -> list[DoctorCheck]:
    checks = plugins.collect("anet_doctor_checks", config=config,
                             unique=lambda check: [f"the doctor check {check.name}"])
    return sorted(checks, key=lambda check: (check.module != "core", check.module, check.name))


def select(checks: list[DoctorCheck], names: Iterable[str]) -> list[DoctorCheck]:
    """Checks named, or all the checks of modules named; an unknown name lists the valid ones."""
    wanted = list(names)
    if not wanted:
        return checks
    valid = {check.name for check in checks} | {check.module for check in checks}
    unknown = [name for name in wanted if name not in valid]
    if unknown:
        raise AnetError("doctor-unknown-check", f"no check or module is called {unknown[0]!r}",
                        hint="valid names: " + ", ".join(sorted(valid)))
    return [check for check in checks if check.name in wanted or check.module in wanted]


async def run_checks(checks: list[DoctorCheck], ctx: CheckContext) -> list[Outcome]:
    return list(await asyncio.gather(*(_run_one(check, ctx) for check in checks)))


async def _run_one(check: DoctorCheck, ctx: CheckContext) -> Outcome:
    started = time.monotonic()
    try:
        result = await asyncio.wait_for(check.run(ctx), timeout=check.timeout)
    except TimeoutError:
        result = CheckResult(CheckStatus.FAIL, f"did not finish within {check.timeout:g} s",
                             hint=f"run `anet doctor {check.name}` again; if it persists, "
                                  f"report it to the {check.module} module's authors")
    except AnetError as error:
        result = CheckResult(CheckStatus.FAIL, error.message, detail=error.detail, hint=error.hint)
    except Exception as error:
        log.debug("event=check-crashed check=%s", check.name, exc_info=True)
        result = CheckResult(CheckStatus.FAIL, f"the check crashed: {type(error).__name__}: "
                             f"{error}", hint=f"report it to the {check.module} module's authors")
    return Outcome(check, result, time.monotonic() - started)
