"""The whole chain in real processes on loopback, in temporary data directories:

    a2a-sdk client -> node A's local A2A endpoint -> hub -> node B -> backend

The hub is `anet hub serve`, A and B are daemons started with `anet up`, and B's backend is the
TCK scenario agent (examples.tck_agent, an official a2a-sdk server) on a unix socket, behind a
bearer token. B trusts A. Every step has a deadline, and every process is stopped afterwards.
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
ANET = [sys.executable, "-m", "anet_core.cli.main"]
STEP_TIMEOUT_S = 30.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def wait_for(predicate: Any, what: str, timeout: float = STEP_TIMEOUT_S) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting until {what}")


def _stop(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


@dataclass
class Daemon:
    """One node's data directory, driven through the real CLI."""

    root: Path
    disabled: str

    def run(self, *args: str) -> str:
        env = {**os.environ, "ANET_DATA_DIR": str(self.root), "ANET_DISABLE_MODULES": self.disabled}
        result = subprocess.run([*ANET, *args], env=env, capture_output=True, text=True,
                                timeout=STEP_TIMEOUT_S, check=False, cwd=REPO)
        if result.returncode != 0:
            raise AssertionError(f"anet {' '.join(args)} -> {result.returncode}\n"
                                 f"{result.stdout}{result.stderr}")
        return result.stdout

    def status(self) -> dict[str, Any]:
        return json.loads(self.run("status", "--json"))

    def configure(self, **modules: Any) -> None:
        path = self.root / "config.json"
        config = json.loads(path.read_text())
        config.setdefault("modules", {}).update(modules)
        path.write_text(json.dumps(config, indent=2))


@dataclass(frozen=True)
class Chain:
    """What a test needs: A's endpoint address and token, and B's AID."""

    address: str
    token: str
    remote: str
    requester: str

    @property
    def base(self) -> str:
        return f"http://{self.address}"

    def agent_url(self, aid: str | None = None) -> str:
        return f"{self.base}/a2a/v1/agents/{aid or self.remote}"

    def headers(self, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", **extra}


@contextmanager
def running_chain() -> Iterator[Chain]:
    # A short private directory: a unix socket path must fit in 108 bytes, and the backends
    # module refuses a socket whose directories others may write.
    root = Path(tempfile.mkdtemp(prefix="anet-a2a-"))
    os.chmod(root, 0o700)
    processes: list[subprocess.Popen[bytes]] = []
    nodes = [Daemon(root / "a", disabled="backends"), Daemon(root / "b", disabled="a2a")]
    try:
        token_file = root / "agent.token"
        token_file.write_text(secrets.token_urlsafe(24) + "\n")
        token_file.chmod(0o600)
        agent_socket = root / "tck.sock"
        with open(root / "agent.log", "ab") as log:
            processes.append(subprocess.Popen(
                [sys.executable, "-m", "examples.tck_agent", "--socket", str(agent_socket),
                 "--token-file", str(token_file)], stdout=log, stderr=log, cwd=REPO,
                start_new_session=True))
        hub_port = free_port()
        with open(root / "hub.log", "ab") as log:
            processes.append(subprocess.Popen(
                [*ANET, "hub", "serve", "--listen", f"127.0.0.1:{hub_port}", "--data",
                 str(root / "hub")], stdout=log, stderr=log, cwd=REPO, start_new_session=True))
        wait_for(lambda: _listening(hub_port), "the hub listens")
        wait_for(agent_socket.exists, "the backend listens")
        for node in nodes:
            node.run("init")
            node.run("join", f"ws://127.0.0.1:{hub_port}")
        a, b = nodes
        b.configure(backends={
            "backends": [{"match": "*", "url": f"unix://{agent_socket}",
                          "token_file": str(token_file)}],
            "retry": {"give_up_after": "0"}})
        for node in nodes:
            node.run("up")
        for node in nodes:
            wait_for(lambda n=node: n.status().get("hub", {}).get("state") == "registered",
                     f"{node.root.name} registered")
        requester, remote = a.status()["aid"], b.status()["aid"]
        b.run("trust", "add", requester)
        state = a.root / "modules" / "a2a"
        yield Chain(address=(state / "a2a_addr.txt").read_text().strip(),
                    token=(state / "a2a_token.txt").read_text().strip(), remote=remote,
                    requester=requester)
    finally:
        for node in nodes:
            if (node.root / "config.json").exists():
                try:
                    node.run("stop")
                except (AssertionError, subprocess.TimeoutExpired):
                    pass
        for process in reversed(processes):
            _stop(process)
        shutil.rmtree(root, ignore_errors=True)


def _listening(port: int) -> bool:
    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) == 0
