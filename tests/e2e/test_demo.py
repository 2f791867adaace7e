"""``anet demo`` as a user runs it: a real subprocess, its output, and nothing left behind."""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

pytest.importorskip("anet_a2a")
pytest.importorskip("anet_backends")
pytest.importorskip("a2a.server")
pytest.importorskip("uvicorn")

from tests.support.processes import ANET

pytestmark = pytest.mark.timeout(120)

DEMO_TIMEOUT_S = 90
WORK_DIR = re.compile(r"Everything lives in (\S+) \(")


def demo_env(tmp_path: Path, **extra: str) -> dict[str, str]:
    """The user's environment; ANET_DATA_DIR points at a node the demo must not touch. The
    demos run in ``tmp_path``, away from the checkout, as from an installed package."""
    return {**os.environ, "ANET_DATA_DIR": str(tmp_path / "my-node"),
            "PYTHONIOENCODING": "utf-8", **extra}


def work_dir_of(output: str) -> Path:
    match = WORK_DIR.search(output)
    assert match, output
    return Path(match.group(1))


def processes_using(path: Path) -> list[str]:
    """Processes whose command line or environment names ``path``."""
    needle = str(path).encode()
    found = []
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit() or int(proc.name) == os.getpid():
            continue
        for name in ("cmdline", "environ"):
            try:
                if needle in (proc / name).read_bytes():
                    found.append(f"{proc.name}: {(proc / 'cmdline').read_bytes()!r}")
                    break
            except OSError:
                continue
    return found


def assert_nothing_left(work: Path, tmp_path: Path) -> None:
    deadline = time.monotonic() + 5
    while processes_using(work) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert processes_using(work) == []
    assert not work.exists()
    assert not (tmp_path / "my-node").exists(), "the demo touched the user's own node"


def test_once_does_a_round_trip_and_leaves_nothing(tmp_path: Path) -> None:
    result = subprocess.run([*ANET, "demo", "--once"], env=demo_env(tmp_path),
                            capture_output=True, text=True, timeout=DEMO_TIMEOUT_S, cwd=tmp_path)
    out = result.stdout
    assert result.returncode == 0, out + result.stderr
    for line in ("✓ example text agent listening on unix://", "✓ hub listening on ws://127.0.0.1:",
                 "✓ alice registered at the hub; local A2A endpoint http://127.0.0.1:",
                 "✓ bob registered at the hub; backend: the text agent",
                 "✓ trust both ways", "✓ alice's endpoint lists bob: card VERIFIED",
                 "✓ round trip: alice's endpoint → hub → bob → text agent → back",
                 "completed, bob's signed receipt verified", "alice asked: summarize 2:",
                 "bob replied: Every remote agent appears", "✓ stopped alice, bob"):
        assert line in out, out
    assert "Press Ctrl-C" not in out
    assert_nothing_left(work_dir_of(out), tmp_path)


def test_custom_text(tmp_path: Path) -> None:
    result = subprocess.run([*ANET, "demo", "--once", "--text", "transform upper: quiet words"],
                            env=demo_env(tmp_path), capture_output=True, text=True,
                            timeout=DEMO_TIMEOUT_S, cwd=tmp_path)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "bob replied: QUIET WORDS" in result.stdout


def test_keeps_running_until_ctrl_c_and_its_commands_work(tmp_path: Path) -> None:
    demo = subprocess.Popen([*ANET, "demo"], env=demo_env(tmp_path), stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True, cwd=tmp_path)
    try:
        lines = []
        deadline = time.monotonic() + DEMO_TIMEOUT_S
        assert demo.stdout is not None
        while time.monotonic() < deadline:
            line = demo.stdout.readline()
            assert line, "".join(lines)
            lines.append(line)
            if line.startswith("Press Ctrl-C"):
                break
        out = "".join(lines)
        work = work_dir_of(out)
        token = (work / "alice" / "modules" / "a2a" / "a2a_token.txt").read_text().strip()
        assert token not in out, "the demo printed the token"
        if shutil.which("bash") and shutil.which("curl"):
            # The commands exactly as printed, pasted into bash.
            start, end = out.index("  export ANET_DATA_DIR"), out.index("The official a2a-sdk")
            script = out[start:end]
            pasted = subprocess.run(["bash", "-c", script], capture_output=True, text=True,
                                    timeout=30)
            assert '"verification":"VERIFIED"' in pasted.stdout, pasted
            assert "Hello From Curl" in pasted.stdout, pasted
        demo.send_signal(signal.SIGINT)
        rest, _ = demo.communicate(timeout=30)
    finally:
        if demo.poll() is None:
            demo.kill()
            demo.wait()
    assert demo.returncode == 0, out + rest
    assert "✓ stopped alice, bob, the hub and the text agent; removed" in rest
    assert_nothing_left(work, tmp_path)


def test_a_failing_part_is_reported_and_everything_stopped(tmp_path: Path) -> None:
    broken = tmp_path / "broken" / "examples" / "text_agent"
    broken.mkdir(parents=True)
    (broken.parent / "__init__.py").write_text("")
    (broken / "__init__.py").write_text("")
    (broken / "__main__.py").write_text("raise SystemExit('the agent refuses to start')\n")
    result = subprocess.run([*ANET, "demo", "--once"],
                            env=demo_env(tmp_path, PYTHONPATH=str(tmp_path / "broken")),
                            capture_output=True, text=True, timeout=DEMO_TIMEOUT_S, cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "✗ starting the example text agent" in result.stdout
    assert "the text agent exited with status 1 while starting" in result.stderr
    assert "the agent refuses to start" in result.stderr
    assert_nothing_left(work_dir_of(result.stdout), tmp_path)


def test_needs_the_a2a_module(tmp_path: Path) -> None:
    result = subprocess.run([*ANET, "demo", "--once"],
                            env=demo_env(tmp_path, ANET_DISABLE_MODULES="a2a"),
                            capture_output=True, text=True, timeout=DEMO_TIMEOUT_S, cwd=tmp_path)
    assert result.returncode == 1
    assert "the demo needs the module a2a" in result.stderr
