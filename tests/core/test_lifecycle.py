"""The real CLI against a real daemon: init, up, status, doctor, modules, stop, and bad input."""

from __future__ import annotations

import json
import os
import signal
import stat
import subprocess
import sys
import time
from pathlib import Path

from anet_core.daemon import running_pid
from anet_core.settings import DataPaths


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_init_creates_private_keys_and_token_and_is_idempotent(anet, data_dir: Path) -> None:
    first = anet("init", check=True)
    assert "created  identity keys" in first.stdout
    keys = sorted((data_dir / "identity").glob("*.key"))
    assert keys and all(mode(key) == 0o600 for key in keys)
    assert mode(data_dir / "control_token.txt") == 0o600
    assert json.loads((data_dir / "config.json").read_text()) == {"node": {}, "modules": {}}
    before = {path: path.read_bytes() for path in [*keys, data_dir / "control_token.txt"]}
    second = anet("init", check=True)
    assert "created" not in second.stdout and "Nothing was replaced" in second.stdout
    assert {path: path.read_bytes() for path in before} == before


def test_the_whole_lifecycle(anet, data_dir: Path) -> None:
    anet("init", check=True)
    up = anet("up", check=True)
    assert "running (pid" in up.stdout and "control" in up.stdout
    status = json.loads(anet("status", "--json", check=True).stdout)
    assert status["running"] and status["pid"] == running_pid(DataPaths(data_dir))
    assert {"a2a", "backends", "x402"} <= set(status["modules"])
    assert any(listener["name"] == "control" for listener in status["listeners"])
    again = anet("up", check=True)
    assert f"already running (pid {status['pid']})" in again.stdout
    doctor = anet("doctor")
    assert "OK    daemon" in doctor.stdout, doctor.stdout
    assert anet("stop", check=True).stdout.startswith("anet stopped")
    assert running_pid(DataPaths(data_dir)) is None
    assert not (data_dir / "control_addr.txt").exists()
    assert json.loads(anet("status", "--json", check=True).stdout)["running"] is False
    assert "not running" in anet("stop", check=True).stdout


def test_a_stale_pid_file_from_a_killed_daemon_does_not_block_up(anet, data_dir: Path) -> None:
    anet("up", check=True)
    pid = running_pid(DataPaths(data_dir))
    os.kill(pid, signal.SIGKILL)
    deadline = time.monotonic() + 10
    while running_pid(DataPaths(data_dir)) is not None and time.monotonic() < deadline:
        time.sleep(0.05)
    assert (data_dir / "logs" / "anetd.pid").exists()
    up = anet("up", check=True)
    assert "running (pid" in up.stdout
    assert running_pid(DataPaths(data_dir)) not in (None, pid)


def test_a_second_daemon_for_the_same_data_dir_refuses_to_start(anet, data_dir: Path) -> None:
    anet("up", check=True)
    second = subprocess.run([sys.executable, "-m", "anet_core.daemon"], capture_output=True,
                            text=True, timeout=60,
                            env={**os.environ, "ANET_DATA_DIR": str(data_dir)})
    assert second.returncode == 2 and "already runs" in second.stderr


def test_a_corrupt_config_stops_up_with_the_file_and_problem(anet, data_dir: Path) -> None:
    anet("init", check=True)
    (data_dir / "config.json").write_text('{"node": ')
    result = anet("up")
    assert result.returncode == 1
    assert f"{data_dir / 'config.json'}: line 1 column 10: invalid JSON" in result.stderr
    assert running_pid(DataPaths(data_dir)) is None


def test_a_daemon_that_fails_while_starting_shows_the_log_tail(anet, data_dir: Path) -> None:
    anet("init", check=True)
    # A module that cannot start: its lifespan raises. The CLI must show why, from the log.
    plugin_dir = data_dir.parent / "site"
    (plugin_dir / "fake_crash").mkdir(parents=True)
    (plugin_dir / "fake_crash" / "__init__.py").write_text(
        "from anet_core import hookimpl\nfrom anet_core.records import Lifespan\n"
        "from contextlib import asynccontextmanager\n\n@asynccontextmanager\n"
        "async def crash():\n    raise RuntimeError('the crash module cannot start')\n    yield\n\n"
        "@hookimpl\ndef anet_lifespan(node):\n    return [Lifespan('crash', crash,"
        " module='crash')]\n")
    info = plugin_dir / "fake_crash-1.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-crash\nVersion: 1.0\n")
    (info / "entry_points.txt").write_text("[anet.modules]\ncrash = fake_crash\n")
    result = anet("up", env={"PYTHONPATH": str(plugin_dir)})
    assert result.returncode == 1
    assert "exited with status" in result.stderr
    assert "the crash module cannot start" in result.stderr


def test_doctor_lists_filters_and_refuses_unknown_names(anet, data_dir: Path) -> None:
    anet("init", check=True)
    listing = anet("doctor", "--list", check=True).stdout
    assert "config-valid" in listing and "a2a-interface" in listing
    only = anet("doctor", "--json", "config-valid")
    report = json.loads(only.stdout)
    assert [check["name"] for check in report["checks"]] == ["config-valid"]
    unknown = anet("doctor", "no-such-check")
    assert unknown.returncode == 1
    assert "no check or module is called 'no-such-check'" in unknown.stderr
    assert "valid names:" in unknown.stderr and "config-valid" in unknown.stderr


def test_doctor_fails_on_a_secret_readable_by_others(anet, data_dir: Path) -> None:
    anet("init", check=True)
    (data_dir / "control_token.txt").chmod(0o644)
    result = anet("doctor", "--json")
    assert result.returncode == 1
    check = next(c for c in json.loads(result.stdout)["checks"] if c["name"] == "secrets-private")
    assert check["status"] == "fail" and "chmod 600" in check["hint"]


def test_modules_lists_installed_and_not_installed(anet, data_dir: Path) -> None:
    report = json.loads(anet("modules", "--json", env={"ANET_DISABLE_MODULES": "x402"},
                             check=True).stdout)
    assert {m["name"] for m in report["installed"]} >= {"a2a", "backends"}
    assert report["disabled"] == ["x402"]
    assert report["notInstalled"] == [{"name": "x402", "install": 'pip install "anet[x402]"'}]
