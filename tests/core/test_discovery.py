"""Entry-point discovery with fake distributions on sys.path: success, import failure, typo."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from anet_core.plugins import make_plugins


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


def test_importing_the_core_registers_nothing() -> None:
    import pluggy

    import anet_core.plugins  # noqa: F401

    assert pluggy.PluginManager("anet").get_plugins() == set()
    assert make_plugins(load_entry_points=False).modules == {}


def test_the_installed_modules_are_found() -> None:
    plugins = make_plugins()
    assert {"a2a", "backends", "x402"} <= set(plugins.modules)
    assert plugins.modules["a2a"].distribution == "anet-a2a"
