"""Real processes on loopback: free ports, ``anet hub serve``, nodes driven through the ``anet``
CLI, and stopping every process a test started."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import socket
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.support.waiting import STEP_TIMEOUT_S, wait_for

ANET = [sys.executable, "-m", "anet_core.cli.main"]
REPO = Path(__file__).resolve().parents[2]


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0


async def anet_async(root: Path, *args: str, check: bool = True,
                     disabled: str = "") -> subprocess.CompletedProcess[str]:
    """The real ``anet`` for the data directory ``root``, without blocking the event loop (for
    tests whose servers run in it); bounded by STEP_TIMEOUT_S."""
    env = {**os.environ, "ANET_DATA_DIR": str(root), "ANET_DISABLE_MODULES": disabled}
    process = await asyncio.create_subprocess_exec(
        *ANET, *args, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=REPO)
    try:
        async with asyncio.timeout(STEP_TIMEOUT_S):
            out, err = await process.communicate()
    except TimeoutError:
        process.kill()
        await process.wait()
        raise AssertionError(f"anet {' '.join(args)} did not finish in {STEP_TIMEOUT_S} s") \
            from None
    result = subprocess.CompletedProcess(list(args), process.returncode or 0, out.decode(),
                                         err.decode())
    if check and result.returncode != 0:
        raise AssertionError(f"anet {' '.join(args)} -> {result.returncode}\n"
                             f"{result.stdout}{result.stderr}")
    return result


def without_uvloop(tmp_path: Path) -> dict[str, str]:
    """An environment in which ``import uvloop`` fails, as without the fast extra."""
    shim = tmp_path / "no-uvloop" / "uvloop"
    shim.mkdir(parents=True)
    (shim / "__init__.py").write_text("raise ImportError('uvloop is hidden by the test')\n")
    path = os.pathsep.join(filter(None, [str(shim.parent), os.environ.get("PYTHONPATH")]))
    return {**os.environ, "PYTHONPATH": path}


def raw_request(address: str, request: bytes) -> bytes:
    """Send ``request`` as bytes to ``host:port`` (what no HTTP client library would send);
    return the first bytes of the answer."""
    host, _, port = address.rpartition(":")
    with socket.create_connection((host, int(port)), timeout=STEP_TIMEOUT_S) as sock:
        sock.sendall(request)
        return sock.recv(4096)


def stop_process(process: subprocess.Popen[bytes]) -> None:
    """SIGTERM, then SIGKILL after 10 s: no test leaves a process behind."""
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class HubProcess:
    """``anet hub serve`` on a loopback port, logging to ``hub.log`` beside its data."""

    data: Path
    port: int
    process: subprocess.Popen[bytes] | None = None
    options: tuple[str, ...] = ()
    """More ``anet hub serve`` options (``--postgres``, ``--nats``, ``--public-url``…)."""
    env: dict[str, str] = field(default_factory=dict)
    """More environment (the engines' credentials)."""

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    def start(self) -> HubProcess:
        self.data.parent.mkdir(parents=True, exist_ok=True)
        with open(self.data.parent / "hub.log", "ab") as log:
            self.process = subprocess.Popen(
                [*ANET, "hub", "serve", "--listen", f"127.0.0.1:{self.port}", "--data",
                 str(self.data), *self.options],
                stdout=log, stderr=log, start_new_session=True, cwd=REPO,
                env={**os.environ, **self.env})
        process = self.process
        wait_for(lambda: process.poll() is not None or listening(self.port),
                 f"the hub listens on {self.port}")
        assert process.poll() is None, f"the hub exited; see {self.data.parent / 'hub.log'}"
        return self

    def stop(self) -> None:
        if self.process is not None:
            stop_process(self.process)
        self.process = None

    def kill(self) -> None:
        """SIGKILL: the instance dies without closing anything."""
        if self.process is not None:
            self.process.kill()
            self.process.wait()
        self.process = None


@dataclass
class NodeDir:
    """A node's data directory, driven through the real ``anet`` CLI."""

    root: Path
    disabled: str = ""

    def run(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        env = {**os.environ, "ANET_DATA_DIR": str(self.root),
               "ANET_DISABLE_MODULES": self.disabled}
        result = subprocess.run([*ANET, *args], env=env, capture_output=True, text=True,
                                timeout=STEP_TIMEOUT_S, check=False, cwd=REPO)
        if check and result.returncode != 0:
            raise AssertionError(f"anet {' '.join(args)} -> {result.returncode}\n"
                                 f"{result.stdout}{result.stderr}")
        return result

    def json(self, *args: str) -> Any:
        return json.loads(self.run(*args, "--json").stdout)

    def status(self) -> dict[str, Any]:
        return self.json("status")

    @property
    def aid(self) -> str:
        return self.status()["aid"]

    def configure(self, **modules: Any) -> None:
        """Set ``modules.<name>`` blocks of config.json."""
        path = self.root / "config.json"
        config = json.loads(path.read_text())
        config.setdefault("modules", {}).update(modules)
        path.write_text(json.dumps(config, indent=2))

    def wait_registered(self) -> None:
        wait_for(lambda: self.status().get("hub", {}).get("state") == "registered",
                 f"{self.root.name} registered")

    def stop(self) -> None:
        if (self.root / "config.json").exists():
            self.run("stop", check=False)


@contextmanager
def hub_and_nodes(root: Path, *names: str,
                  disabled: str = "a2a") -> Iterator[tuple[HubProcess, list[NodeDir]]]:
    """A hub process and a running daemon per name (its ``node.name``), each registered at
    the hub; all stopped at the end."""
    hub = HubProcess(root / "hub", free_port()).start()
    nodes = [NodeDir(root / name, disabled=disabled) for name in names]
    try:
        for node in nodes:
            node.run("init")
            (node.root / "config.json").write_text(json.dumps(
                {"node": {"name": node.root.name, "description": f"{node.root.name}'s agent"},
                 "modules": {}}))
            node.run("join", hub.url)
            node.run("up")
            node.wait_registered()
        yield hub, nodes
    finally:
        for node in nodes:
            node.stop()
        hub.stop()
