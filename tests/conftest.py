"""Fixtures shared by every test: data directories, the real CLI, nodes in this process."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from anet_core.datadir import initialise
from anet_core.node import Node
from anet_core.plugins import Plugins, make_plugins
from anet_core.settings import Settings

CLI_TIMEOUT_S = 60


@pytest.fixture
def data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """An empty data directory, selected through ANET_DATA_DIR; its daemon is stopped after."""
    path = tmp_path / "node"
    monkeypatch.setenv("ANET_DATA_DIR", str(path))
    yield path
    stop_daemon(path)


def stop_daemon(path: Path) -> None:
    """Stop a daemon left running in ``path`` by a failed test; never leave a process behind."""
    from anet_core.daemon import running_pid
    from anet_core.settings import DataPaths

    if running_pid(DataPaths(path)) is not None:
        subprocess.run([sys.executable, "-m", "anet_core.cli.main", "stop"],
                       env={**os.environ, "ANET_DATA_DIR": str(path)}, timeout=CLI_TIMEOUT_S,
                       capture_output=True)


CliRunner = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def anet(data_dir: Path) -> CliRunner:
    """Run the real ``anet`` command in a subprocess against ``data_dir``."""

    def run(*args: str, env: dict[str, str] | None = None, check: bool = False,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [sys.executable, "-m", "anet_core.cli.main", *args],
            env={**os.environ, "ANET_DATA_DIR": str(data_dir), **(env or {})},
            capture_output=True, text=True, timeout=CLI_TIMEOUT_S, input=stdin)
        if check and result.returncode != 0:
            raise AssertionError(f"anet {' '.join(args)} exited {result.returncode}:\n"
                                 f"{result.stdout}\n{result.stderr}")
        return result

    return run


@asynccontextmanager
async def running_node(data_dir: Path, plugins: Plugins | None = None) -> AsyncIterator[Node]:
    """A node running in this event loop, ready when the block starts, stopped when it ends."""
    settings = Settings(data_dir=data_dir)
    initialise(settings.paths)
    plugins = plugins or make_plugins(load_entry_points=False)
    async with Node.open(settings, plugins=plugins) as node:
        task = asyncio.create_task(node.run())
        try:
            async with asyncio.timeout(30):
                while "control" not in node.listeners:
                    if task.done():
                        task.result()
                    await asyncio.sleep(0.01)
            yield node
        finally:
            node.stopping.set()
            async with asyncio.timeout(30):
                await task
