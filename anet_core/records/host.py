"""What a module adds to the daemon and the CLI: its block of config.json, resources that live as
long as the daemon, control routes, doctor checks, subcommands, and what it does once the node's
keys rotated.

Returned by ``anet_config_blocks``, ``anet_lifespan``, ``anet_routes``, ``anet_doctor_checks``,
``anet_cli_commands`` and ``anet_key_rotated``.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import argparse

    from aiohttp import web
    from pydantic import BaseModel

    from anet_core.cli.context import CliContext
    from anet_core.doctor import CheckContext

_KEBAB = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")


@dataclass(frozen=True)
class ConfigBlock:
    """The block ``modules.<module>`` of config.json, validated by ``model``.

    ``also_read_from`` names other modules' blocks in which this module's keys may be written
    too: the loader moves them here before validation, whether the other module is installed or
    not (the backends module reads ``modules.a2a.backends``, docs/configuration.md).
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
    module: str = field(kw_only=True)


@dataclass(frozen=True)
class ControlRoutes:
    """Routes a module adds to the control plane, mounted below ``/<module>/``."""

    module: str
    routes: list[web.RouteDef]


class CheckStatus(StrEnum):
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
    module: str = field(kw_only=True)



@dataclass(frozen=True)
class KeyRotationStep:
    """What a module does once the node's keys rotated (``anet_key_rotated``).

    ``run`` is called with ``emergency`` (the recovery key revoked the old keys: whatever they
    protected may be known to someone else); it returns one sentence for the output of ``anet
    keys rotate``, or None when it had nothing to do.
    """

    module: str
    run: Callable[[bool], str | None]
