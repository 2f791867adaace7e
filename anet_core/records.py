"""The typed records that hooks return. The core runs them; a hook implementation does no I/O."""

from __future__ import annotations

import argparse
import re
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from enum import Enum
from typing import TYPE_CHECKING, Any

from aiohttp import web
from pydantic import BaseModel

if TYPE_CHECKING:
    from anet_core.cli.context import CliContext
    from anet_core.doctor import CheckContext

_KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class ConfigBlock:
    """The block ``modules.<module>`` of config.json, validated by ``model``.

    ``also_read_from`` names other modules' blocks in which this module's keys may be written
    too: the loader moves them here before validation, whether the other module is installed or
    not (the seed documents ``modules.a2a.backends`` for the backends module).
    """

    module: str
    model: type[BaseModel]
    also_read_from: tuple[str, ...] = ()


@dataclass(frozen=True)
class Lifespan:
    """A resource or background loop that lives as long as the daemon.

    ``open`` returns an async context manager; the core enters them in hook order and exits them
    in reverse order on shutdown.
    """

    name: str
    open: Callable[[], AbstractAsyncContextManager[Any]]


@dataclass(frozen=True)
class ControlRoutes:
    """Routes a module adds to the control plane, mounted below ``/<module>/``."""

    module: str
    routes: list[web.RouteDef]


class CheckStatus(str, Enum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"
    SKIP = "skip"


@dataclass(frozen=True)
class CheckResult:
    """What a doctor check found. ``hint`` says what to do whenever the status is not ok."""

    status: CheckStatus
    summary: str
    detail: str = ""
    hint: str = ""


@dataclass(frozen=True)
class DoctorCheck:
    """A named health check. ``name`` is kebab-case and unique across all modules."""

    name: str
    module: str
    summary: str
    run: Callable[[CheckContext], Awaitable[CheckResult]]
    timeout: float = 10.0

    def __post_init__(self) -> None:
        if not _KEBAB.match(self.name):
            raise ValueError(f"Doctor check names are kebab-case, got {self.name!r}")


@dataclass(frozen=True)
class CliCommand:
    """A subcommand of ``anet``.

    ``configure`` adds arguments (or nested subcommands) to the parser argparse made for it;
    ``run`` does the work and returns the exit status.
    """

    name: str
    help: str
    configure: Callable[[argparse.ArgumentParser], None]
    run: Callable[[argparse.Namespace, CliContext], int]
    description: str = ""
    aliases: tuple[str, ...] = field(default=())


@dataclass(frozen=True)
class InboundTask:
    """A task another agent sent to this node, accepted by the inbound policy.

    ``message`` is the requester's A2A message in wire form (camelCase JSON), unchanged.
    """

    task_id: str
    context_id: str
    peer_aid: str
    trusted: bool
    skill: str | None
    message: dict[str, Any]


@dataclass(frozen=True)
class TaskClaim:
    """A module's claim on an inbound task: the core awaits ``serve`` to have it served.

    ``serve`` receives the task and a responder of the task layer through which it reports
    progress, artifacts and the final answer.
    """

    module: str
    serve: Callable[[InboundTask, Any], Awaitable[None]]
