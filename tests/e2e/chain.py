"""The whole chain in real processes on loopback, in temporary data directories:

    a2a-sdk client -> node A's local A2A endpoint -> hub -> node B -> backend

The hub is `anet hub serve`, A and B are daemons started with `anet up`, and B's backend is the
TCK scenario agent (examples.tck_agent, an official a2a-sdk server) on a unix socket, behind a
bearer token. B trusts A. Every step has a deadline, and every process is stopped afterwards.
"""

from __future__ import annotations

import os
import secrets
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support.processes import REPO, HubProcess, NodeDir, free_port, stop_process
from tests.support.waiting import wait_for


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
    agent: subprocess.Popen[bytes] | None = None
    hub = HubProcess(root / "hub", free_port())
    nodes = [NodeDir(root / "a", disabled="backends"), NodeDir(root / "b", disabled="a2a")]
    try:
        token_file = root / "agent.token"
        token_file.write_text(secrets.token_urlsafe(24) + "\n")
        token_file.chmod(0o600)
        agent_socket = root / "tck.sock"
        with open(root / "agent.log", "ab") as log:
            agent = subprocess.Popen(
                [sys.executable, "-m", "examples.tck_agent", "--socket", str(agent_socket),
                 "--token-file", str(token_file)], stdout=log, stderr=log, cwd=REPO,
                start_new_session=True)
        hub.start()
        wait_for(agent_socket.exists, "the backend listens")
        for node in nodes:
            node.run("init")
            node.run("join", hub.url)
        a, b = nodes
        b.configure(backends={
            "backends": [{"match": "*", "url": f"unix://{agent_socket}",
                          "token_file": str(token_file)}],
            "retry": {"give_up_after": "0"}})
        for node in nodes:
            node.run("up")
        for node in nodes:
            node.wait_registered()
        requester, remote = a.status()["aid"], b.status()["aid"]
        b.run("trust", "add", requester)
        state = a.root / "modules" / "a2a"
        yield Chain(address=(state / "a2a_addr.txt").read_text().strip(),
                    token=(state / "a2a_token.txt").read_text().strip(), remote=remote,
                    requester=requester)
    finally:
        for node in nodes:
            node.stop()
        hub.stop()
        if agent is not None:
            stop_process(agent)
        shutil.rmtree(root, ignore_errors=True)
