"""Fixtures shared by every test: data directories, the real CLI, an HTTP client session.

Helpers that tests import are in ``tests/support`` (nothing imports a conftest)."""

from __future__ import annotations

import os
import subprocess
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path

import aiohttp
import pytest

from anet_core.daemon import running_pid
from anet_core.settings import DataPaths
from tests.support.processes import ANET

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
    if running_pid(DataPaths(path)) is not None:
        subprocess.run([*ANET, "stop"], env={**os.environ, "ANET_DATA_DIR": str(path)},
                       timeout=CLI_TIMEOUT_S, capture_output=True)


CliRunner = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def anet(data_dir: Path) -> CliRunner:
    """Run the real ``anet`` command in a subprocess against ``data_dir``."""

    def run(*args: str, env: dict[str, str] | None = None, check: bool = False,
            stdin: str | None = None) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            [*ANET, *args], env={**os.environ, "ANET_DATA_DIR": str(data_dir), **(env or {})},
            capture_output=True, text=True, timeout=CLI_TIMEOUT_S, input=stdin)
        if check and result.returncode != 0:
            raise AssertionError(f"anet {' '.join(args)} exited {result.returncode}:\n"
                                 f"{result.stdout}\n{result.stderr}")
        return result

    return run


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session
