"""Process settings from the environment, and the layout of the data directory."""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from anet_core.errors import AnetError

ENV_PREFIX = "ANET_"
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
EVENT_LOOPS = ("auto", "uvloop", "asyncio")
"""``auto``: uvloop when it can be imported, else asyncio (``anet_core.event_loop``)."""
_TRUE = frozenset({"1", "true", "t", "yes", "y", "on"})
_FALSE = frozenset({"0", "false", "f", "no", "n", "off", ""})


def _environment() -> Mapping[str, str]:
    """The ``ANET_*`` variables by lower-case name without the prefix (``ANET_Data_Dir`` is
    ``data_dir``): the names are read case-insensitively."""
    return {key[len(ENV_PREFIX):].lower(): value for key, value in os.environ.items()
            if key.upper().startswith(ENV_PREFIX)}


def _from_env(name: str, default: str) -> str:
    return _environment().get(name, default)


def _flag(name: str, value: str) -> bool:
    word = value.strip().lower()
    if word not in _TRUE | _FALSE:
        raise AnetError("settings-invalid", f"{ENV_PREFIX}{name.upper()}={value!r} is not a yes "
                        "or no", hint=f"set {ENV_PREFIX}{name.upper()}=1 or 0")
    return word in _TRUE


@dataclass(frozen=True)
class Settings:
    """Settings read from ``ANET_*`` environment variables (documented in docs/configuration.md);
    a keyword given to the constructor wins over the environment.

    A plain dataclass: every command reads it before anything else, and it costs no import.
    """

    data_dir: Path = field(default_factory=lambda: Path(_from_env("data_dir", "~/.anet")))
    """The node's data directory."""
    log_level: str = field(default_factory=lambda: _from_env("log_level", "INFO"))
    """DEBUG, INFO, WARNING or ERROR."""
    disable_modules: str = field(default_factory=lambda: _from_env("disable_modules", ""))
    """Comma-separated module names not to load, e.g. "a2a,x402"."""
    trace_hooks: bool = field(
        default_factory=lambda: _flag("trace_hooks", _from_env("trace_hooks", "0")))
    """Log every hook call (for module authors)."""
    loop: str = field(default_factory=lambda: _from_env("loop", "auto"))
    """The daemon's event loop: auto (uvloop when installed), uvloop or asyncio."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "data_dir", Path(self.data_dir).expanduser().absolute())
        level = self.log_level.upper()
        if level not in LOG_LEVELS:
            raise AnetError("settings-invalid",
                            f"{ENV_PREFIX}LOG_LEVEL={self.log_level!r} is not a log level",
                            hint=f"use {', '.join(LOG_LEVELS[:-1])} or {LOG_LEVELS[-1]}")
        object.__setattr__(self, "log_level", level)
        loop = self.loop.strip().lower()
        if loop not in EVENT_LOOPS:
            raise AnetError("settings-invalid",
                            f"{ENV_PREFIX}LOOP={self.loop!r} is not an event loop",
                            hint=f"use {', '.join(EVENT_LOOPS[:-1])} or {EVENT_LOOPS[-1]}")
        object.__setattr__(self, "loop", loop)

    @property
    def disabled(self) -> frozenset[str]:
        return frozenset(name.strip() for name in self.disable_modules.split(",") if name.strip())

    @property
    def paths(self) -> DataPaths:
        return DataPaths(self.data_dir)


@dataclass(frozen=True)
class DataPaths:
    """Where everything lives inside the data directory (docs/configuration.md, "The data
    directory")."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    @property
    def identity(self) -> Path:
        return self.root / "identity"

    @property
    def control_addr(self) -> Path:
        return self.root / "control_addr.txt"

    @property
    def control_token(self) -> Path:
        return self.root / "control_token.txt"

    @property
    def database(self) -> Path:
        return self.root / "anet.db"

    @property
    def evidence_chain(self) -> Path:
        """The evidence chain (``anet_core.evidence``); its signed head lies beside it."""
        return self.root / "evidence" / "chain.jsonl"

    @property
    def hub_pin(self) -> Path:
        """The home hub's AID and key history as first seen at ``hub.url``."""
        return self.root / "hub-pin.json"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def log_file(self) -> Path:
        return self.logs / "anetd.log"

    @property
    def pid_file(self) -> Path:
        return self.logs / "anetd.pid"

    def module_dir(self, module: str) -> Path:
        return self.root / "modules" / module
