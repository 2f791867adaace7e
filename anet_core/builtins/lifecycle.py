"""``anet init``, ``anet up``, ``anet stop`` and ``anet status``."""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import time
from typing import TYPE_CHECKING, Any

from anet_core import hookimpl
from anet_core.daemon import configure_logging, run_daemon, running_pid
from anet_core.errors import AnetError
from anet_core.records import CliCommand

if TYPE_CHECKING:
    from anet_core.cli.context import CliContext
    from anet_core.settings import DataPaths

# The data directory's set-up (keys, config.json: libsodium, pydantic) loads in the commands
# that make it, not for `anet status`.

START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 30.0
LOG_TAIL_LINES = 20


def _run_init(args: argparse.Namespace, ctx: CliContext) -> int:
    from anet_core.datadir import initialise

    steps = initialise(ctx.paths)
    for step in steps:
        print(f"{'created' if step.created else 'exists '}  {step.what}")
    from anet_core.identity import Identity

    print(f"\nYour node's AID: {Identity.load(ctx.paths.identity).aid}")
    if not any(step.created for step in steps):
        print("Nothing was replaced: keys, tokens and configuration are kept as they were.")
    print("Next: `anet up` starts the node.")
    return 0


def _run_up(args: argparse.Namespace, ctx: CliContext) -> int:
    pid = running_pid(ctx.paths)
    if pid is not None:
        print(f"anet is already running (pid {pid}).")
        _print_status(ctx.daemon.get("/core/status"))
        return 0
    from anet_core.datadir import initialise

    for step in initialise(ctx.paths):
        if step.created:
            print(f"created  {step.what}")
    ctx.config  # noqa: B018 - refuse a broken config.json here, with its message, not in the log
    if args.foreground:
        configure_logging(ctx.settings, to_file=None)
        return run_daemon(ctx.settings)
    _print_status(_start_detached(ctx.paths))
    return 0


def _start_detached(paths: DataPaths) -> dict[str, Any]:
    paths.logs.mkdir(parents=True, exist_ok=True)
    log_start = paths.log_file.stat().st_size if paths.log_file.exists() else 0
    env = {**os.environ, "ANET_DATA_DIR": str(paths.root)}
    with open(paths.log_file, "ab") as log, open(os.devnull, "rb") as devnull:
        process = subprocess.Popen([sys.executable, "-m", "anet_core.daemon"], env=env,
                                   stdin=devnull, stdout=log, stderr=log, start_new_session=True)
    from anet_core.control.client import ControlClient

    client = ControlClient(paths, timeout=2.0)
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise AnetError("daemon-start-failed",
                            f"the daemon exited with status {process.returncode} while starting",
                            detail=_log_tail(paths, log_start),
                            hint=f"the full log is {paths.log_file}")
        if paths.control_addr.exists():
            try:
                status = client.get("/core/status")
            except AnetError:
                status = {}
            if status.get("pid") == process.pid:
                return status
        time.sleep(0.05)
    process.terminate()
    raise AnetError("daemon-start-timeout",
                    f"the daemon did not become ready within {START_TIMEOUT_S:.0f} s",
                    detail=_log_tail(paths, log_start), hint=f"the full log is {paths.log_file}")


def _log_tail(paths: DataPaths, since: int) -> str:
    try:
        with open(paths.log_file, "rb") as log:
            log.seek(since)
            lines = log.read().decode(errors="replace").splitlines()
    except FileNotFoundError:
        return ""
    return "log:\n" + "\n".join(f"  {line}" for line in lines[-LOG_TAIL_LINES:])


def _run_stop(args: argparse.Namespace, ctx: CliContext) -> int:
    pid = running_pid(ctx.paths)
    if pid is None:
        print("anet is not running.")
        return 0
    try:
        ctx.daemon.post("/core/stop")
    except AnetError:
        os.kill(pid, signal.SIGTERM)  # the control plane is gone; the signal does the same
    deadline = time.monotonic() + STOP_TIMEOUT_S
    while running_pid(ctx.paths) is not None:
        if time.monotonic() > deadline:
            raise AnetError("daemon-stop-timeout",
                            f"the daemon (pid {pid}) did not stop within {STOP_TIMEOUT_S:.0f} s",
                            hint=f"see {ctx.paths.log_file}; `kill -9 {pid}` ends it at once")
        time.sleep(0.05)
    print(f"anet stopped (pid {pid}).")
    return 0


def offline_status(ctx: CliContext) -> dict[str, Any]:
    """What status can say without a daemon."""
    from anet_core.identity import Identity

    aid = None
    if (ctx.paths.identity).exists():
        aid = Identity.load(ctx.paths.identity).aid
    return {"running": False, "pid": None, "dataDir": str(ctx.paths.root), "aid": aid,
            "listeners": [], "modules": sorted(ctx.plugins.modules)}


def _run_status(args: argparse.Namespace, ctx: CliContext) -> int:
    status = ctx.daemon.get("/core/status") if running_pid(ctx.paths) else offline_status(ctx)
    if args.json:
        ctx.print_json(status)
    else:
        _print_status(status)
    return 0


def _print_status(status: dict[str, Any]) -> None:
    state = f"running (pid {status['pid']})" if status["running"] else "not running"
    rows = [("state", state), ("AID", status.get("aid") or "none yet (run `anet init`)"),
            ("data dir", status["dataDir"])]
    for listener in status.get("listeners", []):
        line = f"{listener['address']}  {listener['state']}"
        if listener.get("detail"):
            line += f"  ({listener['detail']})"
        rows.append((listener["name"], line))
    rows.append(("modules", ", ".join(status.get("modules", [])) or "none"))
    if status.get("hub"):
        rows.append(("hub", status["hub"]["sentence"]))
    for label, value in rows:
        print(f"  {label:<10} {value}")


@hookimpl
def anet_cli_commands() -> list[CliCommand]:
    def configure_up(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--foreground", action="store_true",
                            help="run in this terminal instead of the background "
                                 "(for systemd and containers); Ctrl-C stops it")

    def configure_status(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="print JSON")

    return [
        CliCommand("init", "create the node: data directory, keys, control token, config.json",
                   configure=lambda parser: None, run=_run_init,
                   description="Create the node in $ANET_DATA_DIR (default ~/.anet). Running it "
                               "again keeps existing keys and tokens and says what exists.",
                   module="core"),
        CliCommand("up", "start the node in the background and wait until it is ready",
                   configure=configure_up, run=_run_up, module="core"),
        CliCommand("stop", "stop the running node", configure=lambda parser: None, run=_run_stop,
                   module="core"),
        CliCommand("status", "show whether the node runs, its listeners, modules and AID",
                   configure=configure_status, run=_run_status, module="core"),
    ]
