"""``make bench`` stays runnable and prints every figure of the table of targets."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

RUN = Path(__file__).resolve().parents[2] / "bench" / "run.py"
PERFORMANCE = RUN.parents[1] / "docs" / "performance.md"


def test_bench_run_help() -> None:
    done = subprocess.run([sys.executable, str(RUN), "--help"], capture_output=True, text=True,
                          timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    assert "--quick" in done.stdout


def test_documented_table_has_every_target() -> None:
    """The table of targets in docs/performance.md shows every figure bench/run.py prints."""
    sys.path.insert(0, str(RUN.parent))
    try:
        import run
    finally:
        sys.path.remove(str(RUN.parent))
    section = PERFORMANCE.read_text().split("## Targets", 1)[1].split("\n## ", 1)[0]
    missing = [target.figure for target in run.TARGETS if target.figure not in section]
    assert not missing, f"docs/performance.md, ## Targets, lacks {missing}"
