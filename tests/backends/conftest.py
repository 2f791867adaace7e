"""The backends module's tests (skipped without it): quick timers, short socket directories,
token files and OS accounts. Helpers are in ``tests.backends.harness``."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("anet_backends")

from anet_backends import forward, retry
from tests.support.sdk_backend import TOKEN


@pytest.fixture(autouse=True)
def quick_timers(monkeypatch: pytest.MonkeyPatch) -> None:
    """Backoff from 50 ms instead of 5 s, and the working notice after 0.3 s, not a minute."""
    monkeypatch.setattr(retry, "FIRST_RETRY_AFTER_S", 0.05)
    monkeypatch.setattr(forward, "WORKING_NOTICE_AFTER_S", 0.3)


@pytest.fixture
def sock_dir(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A short directory for sockets (sun_path holds ~107 bytes), private to root."""
    path = Path("/tmp") / f"anet-bk-{uuid.uuid4().hex[:8]}"
    path.mkdir(mode=0o700)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def token_file(tmp_path: Path) -> Path:
    path = tmp_path / "a2a.token"
    path.write_text(TOKEN + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture
def other_user() -> Iterator[pwd.struct_passwd]:
    """A real account made for this test and removed after it (root only)."""
    if os.geteuid() != 0:
        pytest.skip("creating OS accounts needs root")
    if shutil.which("useradd") is None:
        pytest.skip("useradd is not installed")
    name = f"anetbk{uuid.uuid4().hex[:6]}"
    subprocess.run(["useradd", "--no-create-home", "--shell", "/usr/sbin/nologin", name],
                   check=True, capture_output=True, timeout=30)
    try:
        yield pwd.getpwnam(name)
    finally:
        subprocess.run(["userdel", name], capture_output=True, timeout=30)
