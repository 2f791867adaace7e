"""What a command and an idle daemon load: ``anet --help`` and ``anet status`` import none of the
node's code and no heavy library, and the daemon and the hub leave out the code they never run
(docs/performance.md, "Start-up and idle memory").

Each test reads the modules a real process imported from CPython's own import log
(``PYTHONPROFILEIMPORTTIME``, one ``import time:`` line per module on its first import by an
``import`` statement; ``importlib.import_module`` itself is not logged, what it imports is), so a
module that starts importing one of these again fails here, whatever the machine's speed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
from pathlib import Path

import pytest

from anet_core.cli.context import CliContext
from anet_core.cli.main import _commands, build_parser
from anet_core.plugins import make_plugins
from anet_core.records import CliCommand
from anet_core.settings import Settings
from anet_core.util.lazy import Lazy, lazy
from anet_core.util.memory import release_startup_memory
from tests.support.processes import ANET, HubProcess, free_port

CLI_TIMEOUT_S = 60

HEAVY_FOR_A_COMMAND = frozenset({
    "aiohttp", "pydantic", "pydantic_core", "nacl", "cryptography", "prometheus_client", "asyncio",
    "sqlite3", "mcp", "ruamel", "x402",
    "anet_core.node", "anet_core.wire", "anet_core.config", "anet_core.tasks", "anet_core.link",
    "anet_core.store", "anet_core.identity", "anet_core.protocol",
})
"""What ``anet --help`` and ``anet status`` (daemon running) never need: the event loop, the
HTTP server, the crypto, the models and the node itself."""

NEVER_IN_A_DAEMON = frozenset({
    "cryptography", "mcp", "ruamel", "pydantic_settings", "importlib_metadata", "x402",
    "prometheus_client",
    "anet_hub.rail",
    "anet_mcp.server", "anet_mcp.command", "anet_a2a.hermes", "anet_a2a.cli",
})
"""What an idle node or hub does not run: ``anet mcp`` and its SDK, Hermes wiring (YAML), the
x402 package's models and the hub's payment rail (loaded by the first payment),
prometheus-client (loaded by the first scrape); and what it no longer needs: ``cryptography``
(its crypto comes from libsodium)."""

NODE_SIDE = frozenset({"anet_core.node", "anet_core.tasks", "anet_core.link", "anet_core.store",
                       "anet_a2a.server", "anet_backends.service"})

NEVER_IN_A_HUB = frozenset({"anet_core.wire"})
"""The A2A wire models: a hub relays sealed envelopes and reads JSON with the strict reader only."""


def imported(log: str) -> set[str]:
    """The modules an ``import time:`` log names, and each package above them."""
    names = set()
    for line in log.splitlines():
        if line.startswith("import time:") and "|" in line and "self [us]" not in line:
            parts = line.rsplit("|", 1)[1].strip().split(".")
            names |= {".".join(parts[:depth]) for depth in range(1, len(parts) + 1)}
    return names


def run_logged(data_dir: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], set[str]]:
    result = subprocess.run(
        [*ANET, *args], capture_output=True, text=True, timeout=CLI_TIMEOUT_S,
        env={**os.environ, "ANET_DATA_DIR": str(data_dir), "PYTHONPROFILEIMPORTTIME": "1"})
    return result, imported(result.stderr)


def test_the_import_log_is_read() -> None:
    log = ("import time: self [us] | cumulative | imported package\n"
           "import time:       120 |        120 |   aiohttp.web\nimport time: 3 | 3 | json\n")
    assert imported(log) == {"aiohttp", "aiohttp.web", "json"}


def test_help_loads_every_module_but_none_of_their_code(data_dir: Path) -> None:
    result, loaded = run_logged(data_dir, "--help")
    assert result.returncode == 0, result.stderr[-2000:]
    # The commands of every module are listed: their hooks ran, their modules were loaded.
    assert {"status", "mcp", "hub", "agents", "publish", "doctor"} <= set(result.stdout.split())
    assert {"pluggy", "anet_core.plugins", "argparse"} <= loaded
    assert loaded & HEAVY_FOR_A_COMMAND == set()


def test_status_with_the_daemon_running_loads_none_of_its_code(anet, data_dir: Path) -> None:
    anet("init", check=True)
    up = anet("up", check=True, env={"PYTHONPROFILEIMPORTTIME": "1"})
    assert "running (pid" in up.stdout
    result, loaded = run_logged(data_dir, "status", "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    status = json.loads(result.stdout)
    assert status["running"] and "a2a" in status["modules"]
    assert "http.client" in loaded  # it did ask the daemon
    assert loaded & HEAVY_FOR_A_COMMAND == set()

    # A module's command that asks the daemon loads no more than status does.
    result, loaded = run_logged(data_dir, "agents", "peers", "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    assert json.loads(result.stdout) == []  # no direct peers: it did ask
    assert loaded & HEAVY_FOR_A_COMMAND == set()

    # The daemon `anet up` started wrote its own import log into its log file.
    daemon = imported((data_dir / "logs" / "anetd.log").read_text())
    assert {"anet_core.node", "anet_a2a.server", "aiohttp"} <= daemon
    assert daemon & NEVER_IN_A_DAEMON == set()


def test_status_of_a_stopped_node_reads_its_identity_without_the_models(
        anet, data_dir: Path) -> None:
    """Offline, ``anet status`` shows the AID from the identity's verified key history: the keys
    and their crypto load, the protocol's models (pydantic) do not (``anet_core.protocol.fields``
    holds the AID field type, so ``anet_core.identity`` needs no pydantic)."""
    anet("init", check=True)
    result, loaded = run_logged(data_dir, "status", "--json")
    assert result.returncode == 0, result.stderr[-2000:]
    status = json.loads(result.stdout)
    assert not status["running"] and status["aid"]
    assert {"anet_core.identity", "nacl"} <= loaded
    assert loaded & (HEAVY_FOR_A_COMMAND - {"anet_core.identity", "nacl"}) == set()


@pytest.mark.parametrize("argv", [
    ["hub", "--help"], ["hub", "serve", "--help"], ["mcp", "--help"], ["mcp", "--print-config"],
    ["publish", "token", "list", "--json"],
])
def test_a_module_command_that_serves_nothing_loads_no_server(argv: list[str],
                                                              data_dir: Path) -> None:
    """A command's parser and a command that reads a file load neither the hub's server, nor
    the MCP SDK, nor the a2a module's listeners: what ``lazy`` names lives in a module of
    its own (docs/plugins.md, "Loading nothing until it runs")."""
    result, loaded = run_logged(data_dir, *argv)
    assert result.returncode == 0, result.stderr[-2000:]
    assert loaded & HEAVY_FOR_A_COMMAND == set()


def test_doctor_loads_the_modules_checks_not_their_servers(anet, data_dir: Path) -> None:
    """``anet doctor`` of a node with no backend and no peer: the modules' checks load, with the
    clients they need (the x402 rail's); the node, the modules' forwarder, listeners, signing
    service and peer client do not."""
    anet("init", check=True)
    result, loaded = run_logged(data_dir, "doctor", "--json")
    assert json.loads(result.stdout)["checks"], result.stderr[-2000:]
    assert {"anet_a2a.doctor", "anet_a2a.publish.checks", "anet_backends.doctor"} <= loaded
    assert loaded & (NODE_SIDE | {
        "anet_core.evidence", "anet_backends.service", "anet_backends.forward",
        "anet_a2a.peers", "anet_a2a.publish.server", "anet_x402.signer_service",
        "anet_x402.balance"}) == set()


def test_the_hub_loads_no_node_code(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYTHONPROFILEIMPORTTIME", "1")
    hub = HubProcess(tmp_path / "hub", free_port()).start()
    try:
        loaded = imported((tmp_path / "hub.log").read_text())
    finally:
        hub.stop()
    assert {"anet_hub.app", "anet_hub.relay", "anet_core.protocol"} <= loaded
    assert loaded & (NEVER_IN_A_DAEMON | NODE_SIDE | NEVER_IN_A_HUB) == set()


def test_the_hub_operators_commands_load_no_models(tmp_path: Path, data_dir: Path) -> None:
    """``anet hub pending`` and ``anet hub ledger`` open the hub's storage and print: the signed
    documents and their models (pydantic) load only where the official list is signed
    (amounts live in ``anet_core.protocol.amounts``)."""
    hub_dir = tmp_path / "hub"
    HubProcess(hub_dir, free_port()).start().stop()  # a hub's data directory, as it leaves it
    for argv in (["hub", "pending"], ["hub", "ledger"]):
        result, loaded = run_logged(data_dir, *argv, "--data", str(hub_dir))
        assert result.returncode == 0, result.stderr[-2000:]
        assert {"anet_hub.admin", "anet_core.protocol.amounts"} <= loaded
        assert loaded & {"pydantic", "anet_core.protocol.documents",
                         "anet_core.protocol.payments", "anet_hub.app"} == set()


# --- the parser is built for the command that runs --------------------------------------------


def _refusing(name: str, aliases: tuple[str, ...] = ()) -> CliCommand:
    def configure(parser: argparse.ArgumentParser) -> None:
        configured.append(name)
        parser.add_argument("--flag", action="store_true")

    return CliCommand(name, f"the command {name}", configure, lambda args, ctx: 0,
                      aliases=aliases, module="core")


configured: list[str] = []


@pytest.mark.parametrize(("argv", "named"), [
    (["--help"], []),
    (["top", "--flag"], ["top"]),
    (["group", "leaf", "--flag"], ["group", "group leaf"]),
    (["group", "other"], ["group", "group other"]),
    (["group", "ls"], ["group", "group other"]),
    (["nothing"], []),
])
def test_only_the_commands_argv_names_are_configured(argv: list[str], named: list[str]) -> None:
    commands = [_refusing("top"), _refusing("group"), _refusing("group leaf"),
                _refusing("group other", aliases=("ls",))]
    configured.clear()
    build_parser(commands, argv)
    assert sorted(configured) == sorted(named)
    configured.clear()
    build_parser(commands)
    assert sorted(configured) == ["group", "group leaf", "group other", "top"]


def test_a_command_named_by_alias_parses_its_own_arguments() -> None:
    commands = [_refusing("group other", aliases=("ls",)), _refusing("top")]
    args = build_parser(commands, ["group", "ls", "--flag"]).parse_args(["group", "ls", "--flag"])
    assert args.flag is True and args._command.name == "group other"


def test_a_group_without_a_command_of_its_own_lists_its_commands_and_groups(
        capsys: pytest.CaptureFixture[str]) -> None:
    """``anet publish`` has no command of its own, only the group ``publish token``: its line in
    ``anet --help`` names ``token``, and the group's line names the group's commands."""
    commands = [_refusing("top"), _refusing("group sub one"), _refusing("group sub two"),
                _refusing("group leaf")]
    for argv, listed in ((["--help"], "commands: leaf, sub"),
                         (["group", "--help"], "commands: one, two")):
        with pytest.raises(SystemExit):
            build_parser(commands, argv).parse_args(argv)
        assert listed in capsys.readouterr().out


# --- lazy references ---------------------------------------------------------------------------


def test_every_command_a_module_names_lazily_exists(tmp_path: Path) -> None:
    """A mistyped reference would fail only when its command runs: resolve them all here."""
    ctx = CliContext(settings=Settings(data_dir=tmp_path), plugins=make_plugins())
    references = [function for command in _commands(ctx)
                  for function in (command.configure, command.run) if isinstance(function, Lazy)]
    assert len(references) >= 10  # the modules do name their commands so
    for reference in references:
        assert callable(reference.resolve()), reference.reference


def test_a_lazy_function_imports_its_module_on_the_first_call() -> None:
    parse = lazy("json:loads")
    assert parse("[1]") == [1] and parse.resolve() is json.loads  # type: ignore[attr-defined]
    with pytest.raises(ValueError, match="package.module:name"):
        lazy("json.loads")
    with pytest.raises(AttributeError, match="no_such_function"):
        lazy("json:no_such_function")()


# --- memory start-up freed goes back -----------------------------------------------------------


def _anonymous_mib() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no RssAnon in /proc/self/status")


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads /proc (Linux)")
def test_memory_start_up_freed_is_handed_back() -> None:
    """Freed blocks between live ones stay in the process until ``malloc_trim``."""
    kept, freed = [], []
    for index in range(20_000):  # 80 MB in blocks glibc's malloc serves (above pymalloc's 512 B)
        (kept if index % 8 == 0 else freed).append(bytes(4000 + index % 7))
    freed.clear()
    before = _anonymous_mib()
    release_startup_memory()
    assert _anonymous_mib() < before - 30
    assert len(kept) == 2_500
