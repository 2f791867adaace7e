"""Entry-point discovery with fake distributions on sys.path: success, import failure, typo."""

from __future__ import annotations

import json
import logging
import subprocess
import sys
from pathlib import Path

import pytest
from pydantic import BaseModel

from anet_core import hookimpl
from anet_core.plugins import DEFAULT_PLUGINS, KNOWN_MODULES, make_plugins
from anet_core.records import ConfigBlock


def fake_distribution(root: Path, dist: str, module: str, source: str,
                      entry: str | None = None) -> None:
    (root / module).mkdir(parents=True)
    (root / module / "__init__.py").write_text(source)
    info = root / f"{dist.replace('-', '_')}-1.2.3.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {dist}\nVersion: 1.2.3\n")
    (info / "entry_points.txt").write_text(f"[anet.modules]\n{entry or module} = {module}\n")


@pytest.fixture
def site(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    yield tmp_path
    for name in [name for name in sys.modules if name.startswith("fake_")]:
        del sys.modules[name]


GOOD = """
from anet_core import hookimpl
from anet_core.records import ConfigBlock
from pydantic import BaseModel

class Block(BaseModel):
    pass

@hookimpl
def anet_config_blocks():
    return [ConfigBlock(module="fakegood", model=Block)]
"""


def test_a_module_is_discovered_with_its_distribution_and_version(site: Path) -> None:
    fake_distribution(site, "fake-good", "fake_good", GOOD, entry="fakegood")
    plugins = make_plugins()
    assert plugins.modules["fakegood"].distribution == "fake-good"
    assert plugins.modules["fakegood"].version == "1.2.3"
    assert [block.module for block in plugins.collect("anet_config_blocks")
            if block.module == "fakegood"] == ["fakegood"]


def test_a_module_that_fails_to_import_is_reported_and_the_rest_loads(site: Path) -> None:
    fake_distribution(site, "fake-broken", "fake_broken", "raise ImportError('no such lib')")
    fake_distribution(site, "fake-good", "fake_good", GOOD, entry="fakegood")
    plugins = make_plugins()
    failure = plugins.failures["fake_broken"]
    assert failure.distribution == "fake-broken" and "no such lib" in failure.error
    assert "fakegood" in plugins.modules


def test_a_misspelled_hook_is_reported_and_the_module_left_out(site: Path) -> None:
    source = ("from anet_core import hookimpl\n\n"
              "@hookimpl\ndef anet_doctor_chekcs():\n    return []\n")
    fake_distribution(site, "fake-typo", "fake_typo", source)
    plugins = make_plugins()
    assert "anet_doctor_chekcs" in plugins.failures["fake_typo"].error
    assert "fake_typo" not in plugins.modules


def test_disabled_modules_are_not_loaded(site: Path) -> None:
    fake_distribution(site, "fake-good", "fake_good", GOOD, entry="fakegood")
    plugins = make_plugins(disabled={"fakegood"})
    assert "fakegood" not in plugins.modules and "fakegood" in plugins.report()["disabled"]


IMPORT_EVERYTHING = """
import asyncio, gc, importlib, importlib.util, json, logging, sys, threading
from pathlib import Path

imported = []
for package in sys.argv[1:]:
    spec = importlib.util.find_spec(package)
    if spec is None:
        continue
    for root in spec.submodule_search_locations:
        for path in sorted(Path(root).rglob("*.py")):
            parts = (package, *path.relative_to(root).with_suffix("").parts)
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            importlib.import_module(name)
            imported.append(name)
loggers = [logging.getLogger(), *(logger for name, logger in logging.root.manager.loggerDict.items()
                                  if name.startswith("anet") and hasattr(logger, "handlers"))]
print(json.dumps({
    "imported": imported,
    "threads": [thread.name for thread in threading.enumerate()],
    "handlers": {logger.name: [type(h).__name__ for h in logger.handlers] for logger in loggers
                 if logger.handlers},
    "root_level": logging.getLogger().level,
    "asyncio": sorted({type(thing).__name__ for thing in gc.get_objects()
                       if isinstance(thing, (asyncio.AbstractEventLoop, asyncio.Future))}),
}))
"""


def test_importing_every_module_starts_nothing() -> None:
    """Importing the core and every module (in a fresh interpreter) has no effect but the
    definitions: no thread, no event loop or task, no log handler or level, so a module does its
    work only when a hook is called."""
    packages = ["anet_core", *sorted(f"anet_{module}" for module in KNOWN_MODULES)]
    result = subprocess.run([sys.executable, "-c", IMPORT_EVERYTHING, *packages],
                            capture_output=True, text=True, timeout=60, check=True)
    state = json.loads(result.stdout)
    assert {"anet_core.api", "anet_core.node", "anet_core.tasks.layer"} <= set(state["imported"])
    assert {f"anet_{module}.plugin" for module in make_plugins().modules} <= set(state["imported"])
    assert state["threads"] == ["MainThread"]
    assert state["handlers"] == {} and state["root_level"] == logging.WARNING
    assert state["asyncio"] == []


def test_each_plugin_manager_is_its_own() -> None:
    """make_plugins() keeps no global state: two managers load the same modules and hooks, and
    what is registered in one is not seen by the other."""
    first, second = make_plugins(), make_plugins()
    assert first.pm is not second.pm
    assert first.modules == second.modules and first.failures == second.failures
    names = {name for name, _ in first.pm.list_name_plugin()}
    assert names == {name for name, _ in second.pm.list_name_plugin()}
    assert set(DEFAULT_PLUGINS) | set(first.modules) == names

    class Extra:
        @hookimpl
        def anet_config_blocks(self):
            return [ConfigBlock(module="extra", model=BaseModel)]

    first.pm.register(Extra(), name="extra")
    assert "extra" in {block.module for block in first.collect("anet_config_blocks")}
    assert "extra" not in {block.module for block in second.collect("anet_config_blocks")}
    assert not second.pm.has_plugin("extra")


def test_the_installed_modules_are_found() -> None:
    plugins = make_plugins()
    assert {"a2a", "backends", "x402"} <= set(plugins.modules)
    assert plugins.modules["a2a"].distribution == "anet-a2a"
