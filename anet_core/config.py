"""config.json: the core's keys and one validated block per installed module."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from anet_core.errors import AnetError
from anet_core.records import ConfigBlock
from anet_core.util.durations import GoDuration
from anet_core.util.fsutil import write_atomic

if TYPE_CHECKING:
    from anet_core.plugins import Plugins

Block = TypeVar("Block", bound=BaseModel)


class SkillSection(BaseModel):
    """A skill this node's agent offers, as its network card lists it."""

    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="A stable identifier, e.g. \"summarize\"")
    name: str = Field(default="", description="A short human name")
    description: str = Field(default="", description="What the skill does")
    tags: list[str] = Field(default_factory=list, description="Words the directory searches")


class NodeSection(BaseModel):
    """``node``: what this node says about itself and how long it waits for others."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="", description="The agent's display name on its card")
    description: str = Field(default="", description="One paragraph about what the agent does")
    skills: list[SkillSection] = Field(default_factory=list,
                                       description="Skills listed on the network card")
    no_response_after: GoDuration = Field(
        default=timedelta(minutes=15),
        description="A task sent to a remote agent that hears nothing for this long fails")

    @field_validator("no_response_after")
    @classmethod
    def _waits_at_all(cls, value: timedelta) -> timedelta:
        if value <= timedelta(0):
            raise ValueError("node.no_response_after is 0: every task sent would fail at once; "
                             "give how long to wait for an answer, e.g. \"15m\" (the default)")
        return value


HUB_HEARTBEAT = timedelta(seconds=10)
"""``hub.heartbeat`` by default (anet_core.link.connection says what it does)."""
MIN_HEARTBEAT = timedelta(seconds=1)
MAX_HEARTBEAT = timedelta(minutes=5)


class HubSection(BaseModel):
    """``hub``: the home hub, recorded by ``anet join``."""

    model_config = ConfigDict(extra="forbid")

    url: str | None = Field(default=None, description="ws(s):// or http(s):// URL of the home hub")
    instances: list[str] = Field(
        default_factory=list,
        description="Other URLs of the same hub (its other instances): the node fails over to "
                    "them when its connection ends, in order; `anet join URL URL…` writes them")
    heartbeat: GoDuration = Field(
        default=HUB_HEARTBEAT,
        description="After this long without a frame from the hub the node pings it; no answer "
                    "within half of it ends the connection, and the node connects again")

    @field_validator("heartbeat")
    @classmethod
    def _heartbeat_in_range(cls, value: timedelta) -> timedelta:
        if not MIN_HEARTBEAT <= value <= MAX_HEARTBEAT:
            raise ValueError(f"hub.heartbeat is {value.total_seconds():g} s: give a duration "
                             f"from {MIN_HEARTBEAT.total_seconds():g}s to "
                             f"{MAX_HEARTBEAT.total_seconds() / 60:g}m, e.g. \"10s\" (the "
                             "default)")
        return value


class ConfigFile(BaseModel):
    """The whole of config.json as written on disk."""

    model_config = ConfigDict(extra="forbid")

    node: NodeSection = Field(default_factory=NodeSection)
    hub: HubSection = Field(default_factory=HubSection)
    modules: dict[str, dict[str, Any]] = Field(default_factory=dict)


@dataclass(frozen=True)
class Config:
    """The validated configuration: core sections and every installed module's block."""

    path: Path
    node: NodeSection
    hub: HubSection
    blocks: dict[str, BaseModel] = field(default_factory=dict)

    def module(self, name: str, model: type[Block] | None = None) -> Block:
        """The block of module ``name`` (its defaults when config.json has none)."""
        block = self.blocks[name]
        if model is not None and not isinstance(block, model):
            raise TypeError(f"modules.{name} is a {type(block).__name__}, not {model.__name__}")
        return block  # type: ignore[return-value]


def initial_config() -> dict[str, Any]:
    """What ``anet init`` writes: the core's sections and no module blocks (the a2a module needs
    none, docs/configuration.md)."""
    return {"node": {}, "modules": {}}


def write_config(path: Path, raw: dict[str, Any]) -> None:
    write_atomic(path, (json.dumps(raw, indent=2) + "\n").encode())


def read_raw(path: Path) -> dict[str, Any]:
    """config.json as JSON, or an error naming the file, the line and what is wrong."""
    if not path.exists():
        return initial_config()
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise AnetError("config-invalid-json",
                        f"{path}: line {error.lineno} column {error.colno}: "
                        f"invalid JSON: {error.msg}",
                        hint="fix the file, or move it away and run `anet init` for a fresh one",
                        ) from None
    except (OSError, UnicodeDecodeError) as error:
        raise AnetError("config-unreadable", f"{path}: cannot be read: {error}") from None
    if not isinstance(raw, dict):
        raise AnetError("config-invalid", f"{path}: expected a JSON object at the top, "
                        f"got {type(raw).__name__}")
    return raw


def load_config(path: Path, plugins: Plugins) -> Config:
    """Read and validate config.json against the core model and every module's block model."""
    blocks = plugins.collect("anet_config_blocks",
                             unique=lambda block: [f"the config block modules.{block.module}"])
    return validate_config(path, read_raw(path), blocks, failed=plugins.failures,
                           installable=plugins.install_commands())


def validate_config(path: Path, raw: dict[str, Any], blocks: Iterable[ConfigBlock], *,
                    failed: Iterable[str] = (), installable: Mapping[str, str] = {}) -> Config:
    """Validate ``raw`` against the core model and ``blocks``. ``failed`` names the modules that
    failed to load; ``installable`` gives the command that installs a module by its name, for a
    block whose module is not installed."""
    models = {block.module: block for block in blocks}
    try:
        parsed = ConfigFile.model_validate(raw)
    except ValidationError as error:
        raise _invalid(path, error, prefix=()) from None
    modules, borrowed = _gather_borrowed_keys(path, dict(parsed.modules), models)
    for name in sorted(set(modules) - set(models)):
        if name in failed:
            raise AnetError("config-module-broken",
                            f"{path}: modules.{name}: the module {name} failed to load",
                            hint="run `anet doctor` to see why")
        if name in installable:
            raise AnetError("config-module-not-installed",
                            f"{path}: modules.{name}: the module {name} is not installed",
                            hint=f"install it with: {installable[name]}")
        raise AnetError("config-module-unknown",
                        f"{path}: modules.{name}: no installed module is called {name!r}",
                        hint="installed modules: " + (", ".join(sorted(models)) or "none"))
    validated: dict[str, BaseModel] = {}
    for name, block in models.items():
        try:
            validated[name] = block.model.model_validate(modules.get(name, {}))
        except ValidationError as error:
            # An error in a key written inside another module's block names that block.
            loc = error.errors()[0]["loc"]
            written_in = borrowed.get((name, str(loc[0]) if loc else ""), name)
            raise _invalid(path, error, prefix=("modules", written_in)) from None
    return Config(path=path, node=parsed.node, hub=parsed.hub, blocks=validated)


def _gather_borrowed_keys(path: Path, modules: dict[str, dict[str, Any]],
                          models: dict[str, ConfigBlock]
                          ) -> tuple[dict[str, dict[str, Any]], dict[tuple[str, str], str]]:
    """Move keys a module accepts inside another module's block into its own block; also
    return where each moved key was written ((owner, key) → the host block)."""
    borrowed: dict[tuple[str, str], str] = {}
    for owner, block in models.items():
        keys = {info.alias or name for name, info in block.model.model_fields.items()}
        for host in block.also_read_from:
            hosted = modules.get(host)
            if not isinstance(hosted, dict):
                continue
            for key in sorted(keys & set(hosted)):
                if key in modules.get(owner, {}):
                    raise AnetError(
                        "config-key-twice",
                        f"{path}: {key} is set both in modules.{host} and in modules.{owner}",
                        hint=f"keep one of them, preferably modules.{owner}.{key}")
                modules.setdefault(owner, {})[key] = hosted[key]
                modules[host] = {k: v for k, v in modules[host].items() if k != key}
                borrowed[(owner, key)] = host
            if not modules[host]:
                del modules[host]
    return modules, borrowed


def _invalid(path: Path, error: ValidationError, prefix: tuple[str, ...]) -> AnetError:
    first = error.errors()[0]
    where = format_location(prefix + tuple(first["loc"]))
    got = first.get("input")
    shown = ("" if first["type"] in {"missing", "extra_forbidden"}
             else f" (got {json.dumps(got, default=str)})")
    message = first["msg"]
    if first["type"] == "extra_forbidden":
        message = "unknown key"
    more = len(error.errors()) - 1
    tail = f"; and {more} more problem{'s' if more > 1 else ''}" if more else ""
    return AnetError("config-invalid", f"{path}: {where}: {message}{shown}{tail}",
                     hint="see docs/configuration.md for every key")


def format_location(loc: Iterable[object]) -> str:
    """("modules", "backends", "backends", 0, "url") → modules.backends.backends[0].url"""
    text = ""
    for part in loc:
        text += f"[{part}]" if isinstance(part, int) else (f".{part}" if text else str(part))
    return text
