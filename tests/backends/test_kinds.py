"""Backend kinds from a third-party distribution in tests/, at start and in the doctor."""

from __future__ import annotations

import json
import sys
import tomllib
from pathlib import Path

import pytest

from anet_backends import plugin
from anet_backends.config import BackendsConfig
from anet_backends.kinds import installed_kinds
from anet_backends.service import Backends
from anet_core.api import AnetError, CheckStatus, InboundPolicy
from anet_core.config import load_config
from anet_core.doctor import CheckContext, all_checks, run_checks
from anet_core.plugins import make_plugins
from anet_core.settings import Settings
from tests.backends.harness import Recorder, inbound, uncounted
from tests.support.nodes import running_node
from tests.support.sdk_backend import TOKEN, sdk_backend

DISTRIBUTION = Path(__file__).parent / "kind_command"
pytestmark = pytest.mark.timeout(60)


@pytest.fixture
def kind_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Install tests/backends/kind_command as an editable install does: its source on sys.path
    and a dist-info with the entry points its pyproject declares."""
    project = tomllib.loads((DISTRIBUTION / "pyproject.toml").read_text())["project"]
    site = tmp_path / "site"
    info = site / f"{project['name'].replace('-', '_')}-{project['version']}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {project['name']}\n"
                                   f"Version: {project['version']}\n")
    groups = project["entry-points"]
    (info / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{name} = {value}\n" for name, value in entries.items())
        for group, entries in groups.items()))
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.syspath_prepend(str(DISTRIBUTION))
    yield
    sys.modules.pop("anet_kind_command", None)


async def test_a_kind_from_a_distribution_serves_a_task(kind_command: None,
                                                        tmp_path: Path) -> None:
    plugins = make_plugins()
    assert plugins.modules["kind_command"].distribution == "anet-kind-command"
    kinds = installed_kinds(plugins)
    assert kinds["command"].name == "command" and kinds["unix"].name == "a2a"
    config_path = tmp_path / "config.json"
    config_path.write_text(json.dumps({"modules": {"backends": {"backends": [
        {"match": "*", "url": "command:///bin/cat"}]}}}))
    config = load_config(config_path, plugins).module("backends", BackendsConfig)
    service = Backends(config, kinds, uncounted, idle_timeout_s=5)
    claim = service.claim(inbound("through cat"), InboundPolicy.TRUSTED)
    assert claim is not None
    recorder = Recorder()
    await claim.serve(inbound("through cat"), recorder)
    assert recorder.texts("artifact") == ["through cat"]
    assert recorder.kinds()[-1] == "complete"
    assert [kind for kind, _ in recorder.recorded] == ["backends.forwarded"]


COMMAND_BACKEND = {"modules": {"backends": {"backends": [
    {"match": "*", "url": "command:///bin/cat"}]}}}


async def test_without_the_kind_its_scheme_stops_the_start(tmp_path: Path) -> None:
    data = tmp_path / "node"
    data.mkdir()
    (data / "config.json").write_text(json.dumps(COMMAND_BACKEND))
    plugins = make_plugins(load_entry_points=False)
    plugins.pm.register(plugin, name="backends")
    with pytest.raises(AnetError, match=r"backends\[0\]\.url 'command:///bin/cat'.*no installed "
                                        r"backend kind takes command:"):
        async with running_node(data, plugins):
            pass


async def test_without_the_kind_the_doctor_fails_the_backend(tmp_path: Path) -> None:
    data = tmp_path / "node"
    data.mkdir()
    (data / "config.json").write_text(json.dumps(COMMAND_BACKEND))
    ctx = CheckContext(settings=Settings(data_dir=data), plugins=make_plugins())
    checks = [check for check in all_checks(ctx.plugins, ctx.config)
              if check.module == "backends" and check.name != "backends-retry"]
    (outcome,) = await run_checks(checks, ctx)
    assert outcome.result.status is CheckStatus.FAIL
    assert outcome.result.summary == "no installed backend kind takes 'command:///bin/cat'"


async def test_doctor_has_one_check_per_backend(tmp_path: Path, sock_dir: Path,
                                                token_file: Path) -> None:
    data = tmp_path / "node"
    data.mkdir()
    path = sock_dir / "a2a.sock"
    (data / "config.json").write_text(json.dumps({"modules": {"backends": {"backends": [
        {"match": "*", "url": f"unix://{path}", "token_file": str(token_file)},
        {"match": "loose", "url": f"unix://{path}", "token_file": str(token_file),
         "peer_check": "path-only"},
        {"match": "gone", "url": f"unix://{sock_dir}/absent.sock"}]}}}))
    ctx = CheckContext(settings=Settings(data_dir=data), plugins=make_plugins())
    checks = [check for check in all_checks(ctx.plugins, ctx.config) if check.module == "backends"]
    assert [check.name for check in checks] == ["backend-any", "backend-gone", "backend-loose",
                                                 "backends-retry"]
    async with sdk_backend(path, streaming=True, token=TOKEN):
        results = {outcome.check.name: outcome.result for outcome in await run_checks(checks, ctx)}
    assert results["backend-any"].status is CheckStatus.OK
    assert results["backend-any"].summary.startswith("card 'SDK backend' readable, streaming")
    assert results["backend-loose"].status is CheckStatus.WARN
    assert "peer_check: path-only" in results["backend-loose"].summary
    assert results["backend-gone"].status is CheckStatus.FAIL
    assert results["backend-gone"].summary.startswith("unreachable")

