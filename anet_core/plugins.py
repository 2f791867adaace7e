"""The plugin manager: built-in plugins, entry-point modules, and what failed to load."""

from __future__ import annotations

import importlib
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any

import pluggy

from anet_core import PROJECT, hookspecs
from anet_core.errors import AnetError

if TYPE_CHECKING:
    from anet_core.identity import Identity
    from anet_core.settings import DataPaths

ENTRY_POINT_GROUP = f"{PROJECT}.modules"

DEFAULT_PLUGINS: tuple[str, ...] = (
    "anet_core.builtins.lifecycle",
    "anet_core.builtins.modules_command",
    "anet_core.builtins.doctor_command",
    "anet_core.builtins.core_checks",
    "anet_core.builtins.core_routes",
    "anet_core.builtins.join",
    "anet_core.builtins.tasks_cli",
    "anet_core.builtins.task_events",
    "anet_core.builtins.directory_cli",
    "anet_core.builtins.identity_cli",
    "anet_core.builtins.metrics_routes",
    "anet_core.demo",
)
"""Built-in parts of the core, registered through the same hooks as any module."""

KNOWN_MODULES: dict[str, str] = {
    "a2a": "anet-a2a",
    "backends": "anet-backends",
    "hub": "anet-hub",
    "mcp": "anet-mcp",
    "x402": "anet-x402",
}
"""The modules this project publishes, by module name, with their distributions."""

log = logging.getLogger(__name__)


def install_command(module: str) -> str:
    """The exact command that installs a known module through the root distribution's extra."""
    return f'pip install "anet[{module}]"'


@dataclass(frozen=True)
class ModuleInfo:
    name: str
    distribution: str
    version: str


@dataclass(frozen=True)
class LoadFailure:
    name: str
    distribution: str
    error: str


@dataclass
class Plugins:
    """The plugin manager together with what loading found."""

    pm: pluggy.PluginManager
    modules: dict[str, ModuleInfo] = field(default_factory=dict)
    failures: dict[str, LoadFailure] = field(default_factory=dict)
    disabled: frozenset[str] = frozenset()

    @property
    def hook(self) -> pluggy.HookRelay:
        return self.pm.hook

    def not_installed(self) -> list[str]:
        """Known modules that are neither installed nor failing to load."""
        return sorted(set(KNOWN_MODULES) - set(self.modules) - set(self.failures))

    def report(self) -> dict[str, list]:
        """Installed, not installed, failed and disabled modules, as data."""
        return {
            "installed": [{"name": info.name, "distribution": info.distribution,
                           "version": info.version} for info in self.modules.values()],
            "notInstalled": [{"name": name, "install": install_command(name)}
                             for name in self.not_installed()],
            "failed": [{"name": failure.name, "distribution": failure.distribution,
                        "error": failure.error} for failure in self.failures.values()],
            "disabled": sorted(self.disabled),
        }

    def collect(self, hook_name: str, /, *, unique: Callable[[Any], Iterable[str]] | None = None,
                **kwargs: object) -> list:
        """Call a list-returning hook with ``kwargs`` and flatten the lists, in hook order.

        ``unique(record)`` names what a record claims, as the error shows it ("the command
        `anet hello`"); two records claiming one thing are refused with an error that names
        both modules (every record names its ``module``).
        """
        results = getattr(self.pm.hook, hook_name)(**kwargs)
        records = [record for result in results if result for record in result]
        if unique is not None:
            claimed: dict[str, Any] = {}
            for record in records:
                for claim in unique(record):
                    if claim in claimed:
                        raise _duplicate(hook_name, claim, claimed[claim].module, record.module)
                    claimed[claim] = record
        return records

    def after_key_rotation(self, paths: DataPaths, identity: Identity,
                           emergency: bool) -> list[str]:
        """Run every module's ``anet_key_rotated`` steps; the sentences they report, a failed
        step's included."""
        notes = []
        for step in self.collect("anet_key_rotated", paths=paths, identity=identity):
            try:
                note = step.run(emergency)
            except Exception as error:
                log.exception("event=key-rotation-step-failed module=%s", step.module)
                note = (f"{step.module}: its follow-up to the rotation failed "
                        f"({type(error).__name__}: {error}); see the log")
            if note:
                notes.append(note)
        return notes

    def install_commands(self) -> dict[str, str]:
        """The command that installs each module this project publishes, by module name."""
        return {name: install_command(name) for name in KNOWN_MODULES}


def _duplicate(hook_name: str, claim: str, first: str, second: str) -> AnetError:
    reason = f"{hook_name.removeprefix(f'{PROJECT}_').replace('_', '-')}-duplicate"
    if first == second:
        return AnetError(reason, f"the module {first} declares {claim} twice",
                         hint=f"leave it out with ANET_DISABLE_MODULES={first} until it is fixed")
    return AnetError(reason, f"the modules {first} and {second} both declare {claim}",
                     hint="uninstall one of them, or leave it out with ANET_DISABLE_MODULES")


def make_plugins(*, load_entry_points: bool = True, disabled: Iterable[str] = (),
                 trace: bool = False) -> Plugins:
    """Build a plugin manager: hookspecs, built-ins, then the installed modules.

    A module that fails to import or that implements a hook with no spec is recorded in
    ``failures`` and left out; the rest load.
    """
    pm = pluggy.PluginManager(PROJECT)
    pm.add_hookspecs(hookspecs)
    for dotted in DEFAULT_PLUGINS:
        pm.register(importlib.import_module(dotted), name=dotted)
    pm.check_pending()
    plugins = Plugins(pm=pm, disabled=frozenset(disabled))
    if load_entry_points:
        for entry_point in sorted(entry_points(group=ENTRY_POINT_GROUP), key=lambda e: e.name):
            _load(plugins, entry_point)
    if trace:
        pm.trace.root.setwriter(log.debug)
        pm.enable_tracing()
    return plugins


def _load(plugins: Plugins, entry_point: EntryPoint) -> None:
    name = entry_point.name
    dist = entry_point.dist
    distribution, version = (dist.name, dist.version) if dist else ("?", "?")
    if name in plugins.disabled:
        plugins.pm.set_blocked(name)
        log.debug("event=module-disabled module=%s by=ANET_DISABLE_MODULES", name)
        return
    if plugins.pm.has_plugin(name) or name in plugins.failures:
        log.warning("event=module-ignored module=%s distribution=%s reason=already-loaded", name,
                    distribution)
        return
    try:
        module = entry_point.load()
        plugins.pm.register(module, name=name)
    except Exception as error:  # noqa: BLE001 - a broken module must not stop the node
        plugins.failures[name] = LoadFailure(name, distribution, f"{type(error).__name__}: {error}")
        log.error("event=module-failed module=%s distribution=%s error=%r", name, distribution,
                  str(error))
        return
    try:
        plugins.pm.check_pending()
    except pluggy.PluginValidationError as error:
        plugins.pm.unregister(name=name)
        plugins.failures[name] = LoadFailure(name, distribution, str(error))
        log.error("event=module-unknown-hook module=%s distribution=%s error=%r", name,
                  distribution, str(error))
        return
    plugins.modules[name] = ModuleInfo(name, distribution, version)
