"""A node's data directory is private even when it existed, open to others, before `anet init`."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def test_init_tightens_an_open_data_directory(anet, data_dir: Path) -> None:
    data_dir.mkdir(mode=0o755)
    os.chmod(data_dir, 0o755)
    out = anet("init", check=True).stdout
    assert mode(data_dir) == 0o700
    assert "made private (mode 700, was 755)" in out
    assert "made private" not in anet("init", check=True).stdout  # nothing left to tighten


def test_doctor_fails_an_open_data_directory(anet, data_dir: Path) -> None:
    anet("init", check=True)
    os.chmod(data_dir, 0o755)
    checks = {check["name"]: check for check in json.loads(
        anet("doctor", "--json").stdout)["checks"]}
    assert checks["data-dir"]["status"] == "fail"
    assert "chmod 700" in checks["data-dir"]["hint"]
