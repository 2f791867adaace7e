"""The daemon process: one per data directory, held by a lock on the pid file."""

from __future__ import annotations

import fcntl
import logging
import os
import signal
import sys
from pathlib import Path
from typing import IO

from anet_core.errors import AnetError
from anet_core.plugins import Plugins, make_plugins
from anet_core.settings import DataPaths, Settings

log = logging.getLogger(__name__)


def running_pid(paths: DataPaths) -> int | None:
    """The pid of the daemon that holds this data directory, or None.

    The daemon holds an exclusive lock on its pid file for its whole life, so a pid file left by
    a killed daemon is recognised as stale: its lock died with the process.
    """
    try:
        with open(paths.pid_file, "r+") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                text = handle.read().strip()
                return int(text) if text.isdigit() else -1
            return None
    except FileNotFoundError:
        return None


def _hold_pid_file(paths: DataPaths) -> IO[str]:
    paths.logs.mkdir(parents=True, exist_ok=True)
    handle = open(paths.pid_file, "a+")
    try:
        fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        handle.seek(0)
        holder = handle.read().strip()
        handle.close()
        raise AnetError("daemon-already-running",
                        f"a daemon (pid {holder}) already runs for {paths.root}",
                        hint="stop it with `anet stop`") from None
    handle.seek(0)
    handle.truncate()
    handle.write(f"{os.getpid()}\n")
    handle.flush()
    return handle


def configure_logging(settings: Settings, *, to_file: Path | None) -> None:
    handler: logging.Handler = (logging.FileHandler(to_file) if to_file
                                else logging.StreamHandler(sys.stderr))
    handler.setFormatter(logging.Formatter(
        "%(asctime)s %(levelname)s %(name)s: %(message)s", "%Y-%m-%dT%H:%M:%S%z"))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(settings.log_level)
    logging.getLogger("aiohttp.access").setLevel(logging.WARNING)


def run_daemon(settings: Settings) -> int:
    """Run the node in this process until SIGTERM or SIGINT. Returns the exit status."""
    # The node's code loads here, not when a command imports running_pid from this module.
    from anet_core.datadir import initialise
    from anet_core.event_loop import run_node_event_loop

    paths = settings.paths
    initialise(paths)
    pid_handle = _hold_pid_file(paths)
    try:
        plugins = make_plugins(disabled=settings.disabled, trace=settings.trace_hooks)
        run_node_event_loop(lambda: _serve(settings, plugins), settings.loop)
        return 0
    finally:
        pid_handle.close()


async def _serve(settings: Settings, plugins: Plugins) -> None:
    import asyncio

    from anet_core.node import Node

    loop = asyncio.get_running_loop()
    # A signal while the node opens stops it as soon as it is open, after a clean start.
    requested = asyncio.Event()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, requested.set)
    async with Node.open(settings, plugins=plugins) as node:
        for signum in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(signum, node.stopping.set)
        if requested.is_set():
            node.stopping.set()
        await node.run()


def main() -> int:
    """``python -m anet_core.daemon``: what ``anet up`` starts in the background."""
    settings = Settings()
    configure_logging(settings, to_file=None)
    try:
        return run_daemon(settings)
    except AnetError as error:
        log.error("event=start-failed reason=%s message=%r", error.reason, error.message)
        print(error.render(), file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
