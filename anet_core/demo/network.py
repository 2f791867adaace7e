"""The embedded network of ``anet demo`` and ``make bench``: a hub, nodes, the example agent.

Every part is a real process on loopback, started exactly as a user starts it (``anet hub serve``,
the daemon that ``anet up`` starts, ``python -m examples.text_agent``), each in its own directory
under one temporary directory. The processes are children of this one: on Linux each is told to
receive SIGTERM when this process dies (PR_SET_PDEATHSIG), so even ``kill -9`` of the demo leaves
nothing running; on every other exit path :meth:`EmbeddedNetwork.close` stops them in order.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import secrets
import shutil
import signal
import socket
import sys
import tempfile
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import aiohttp

from anet_core.config import read_raw, write_config
from anet_core.control.client import answer
from anet_core.datadir import initialise
from anet_core.errors import AnetError
from anet_core.identity import Identity
from anet_core.settings import DataPaths
from anet_core.util.fsutil import write_private
from anet_core.wire import TaskState

READY_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0
SEND_TIMEOUT_S = 60.0
POLL_S = 0.05
HUB_PORT_ATTEMPTS = 3
LOG_TAIL_LINES = 15
AGENT_SOCKET = "text-agent.sock"

TEXT_AGENT_SKILLS = [
    {"id": "stats", "name": "Text statistics", "tags": ["text", "count"],
     "description": "Characters, words, sentences, reading time and the most frequent words"},
    {"id": "summarize", "name": "Extractive summary", "tags": ["text", "summary"],
     "description": "The N most representative sentences, in their order: 'summarize 2: <text>'"},
    {"id": "transform", "name": "Transform text", "tags": ["text"],
     "description": "upper, lower, title, slug, reverse-lines, sort-lines, dedupe-lines: "
                    "'transform slug: <text>'"},
]
"""Bob's skills on his network card: what the example text agent behind him does."""

# Runs in the child before the real program: ask the kernel for SIGTERM when the parent dies,
# then become the program (the pid stays the same). A parent that died before prctl is noticed.
_ORPHAN_GUARD = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None).prctl(1, signal.SIGTERM)\n"  # 1 = PR_SET_PDEATHSIG
    "os.getppid() == int(sys.argv[1]) or os._exit(70)\n"
    "os.execv(sys.argv[2], sys.argv[2:])\n")

T = TypeVar("T")


# --- processes -----------------------------------------------------------------------------------


@dataclass
class Child:
    """A process of the network and the file its output goes to."""

    name: str
    process: asyncio.subprocess.Process
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def running(self) -> bool:
        return self.process.returncode is None

    def log_tail(self, lines: int = LOG_TAIL_LINES) -> str:
        try:
            text = self.log.read_text(errors="replace").splitlines()[-lines:]
        except FileNotFoundError:
            return ""
        return f"the end of {self.name}'s log:\n" + "\n".join(f"  {line}" for line in text)


async def spawn(name: str, argv: list[str], *, log: Path, env: dict[str, str]) -> Child:
    """Start ``argv`` with its output in ``log``, in a session of its own (so a Ctrl-C reaches
    only the demo, which then stops everything in order) and bound to this process's life."""
    if sys.platform.startswith("linux"):
        argv = [sys.executable, "-c", _ORPHAN_GUARD, str(os.getpid()), *argv]
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        process = await asyncio.create_subprocess_exec(
            *argv, stdin=asyncio.subprocess.DEVNULL, stdout=out, stderr=out, env=env,
            start_new_session=True)
    return Child(name, process, log)


async def stop(child: Child, timeout: float = STOP_TIMEOUT_S) -> None:
    """SIGTERM, then SIGKILL if it has not exited within ``timeout`` seconds."""
    if child.running:
        with contextlib.suppress(ProcessLookupError):
            child.process.send_signal(signal.SIGTERM)
        try:
            await asyncio.wait_for(child.process.wait(), timeout)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                child.process.kill()
    await child.process.wait()


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


# --- the example agent ---------------------------------------------------------------------------


def text_agent_root() -> Path:
    """The directory that holds the package ``examples`` (the checkout), or an error saying how
    to get one. The agent is not part of the installed package: it needs the official a2a-sdk
    server and uvicorn, which anet itself does not depend on."""
    try:
        spec = importlib.util.find_spec("examples.text_agent")
    except ModuleNotFoundError:
        spec = None
    if spec is not None and spec.origin:
        root = Path(spec.origin).parent.parent.parent
    elif (Path.cwd() / "examples" / "text_agent" / "__init__.py").exists():
        root = Path.cwd()
    else:
        raise AnetError(
            "demo-no-example-agent",
            "the demo's backend, the example agent examples/text_agent, is not here: it ships "
            "with the source checkout of anet, not with the installed package",
            hint="run it from a checkout: `make demo`, or `anet demo` in the checkout's directory")
    missing = [name for name in ("a2a", "uvicorn") if importlib.util.find_spec(name) is None]
    if missing:
        raise AnetError(
            "demo-no-a2a-sdk",
            "the example agent needs the official a2a-sdk server and uvicorn "
            f"({', '.join(missing)} not installed)",
            hint='pip install "a2a-sdk[http-server]" uvicorn   (make demo installs them)')
    return root


# --- nodes ---------------------------------------------------------------------------------------


@dataclass(frozen=True)
class A2AEndpoint:
    """A node's local A2A endpoint as its a2a module describes it (``GET /a2a/endpoint``)."""

    url: str
    agents_path: str
    token_file: Path

    @property
    def agents_url(self) -> str:
        return f"{self.url}{self.agents_path}"

    def agent_url(self, aid: str) -> str:
        """The URL of agent ``aid`` on this endpoint, where its proxy card is."""
        return f"{self.agents_url}/{aid}"

    def token(self) -> str:
        return self.token_file.read_text().strip()


@dataclass
class DemoNode:
    """One node of the network: its data directory, AID and daemon, and its local A2A endpoint
    once it started with one."""

    name: str
    paths: DataPaths
    aid: str
    child: Child | None = None
    endpoint: A2AEndpoint | None = None
    jsonrpc_urls: dict[str, str] = field(default_factory=dict)
    """The JSON-RPC interface of each remote agent, from its proxy card."""

    @property
    def a2a(self) -> A2AEndpoint:
        if self.endpoint is None:
            raise AnetError("demo-no-a2a", f"{self.name} was started without its local A2A "
                            "endpoint")
        return self.endpoint

    def a2a_token(self) -> str:
        return self.a2a.token()

    def agent_url(self, aid: str) -> str:
        """The URL of agent ``aid`` on this node's local A2A endpoint (its proxy card)."""
        return self.a2a.agent_url(aid)


@dataclass
class EmbeddedNetwork:
    """The running parts, in the order they started; :meth:`close` stops them in reverse."""

    work: Path
    session: aiohttp.ClientSession
    agent_root: Path | None = None
    hub_url: str = ""
    nodes: dict[str, DemoNode] = field(default_factory=dict)
    children: list[Child] = field(default_factory=list)

    @classmethod
    @contextlib.asynccontextmanager
    async def open(cls, *, agent_root: Path | None = None, keep: bool = False,
                   prefix: str = "anet-demo-") -> AsyncIterator[EmbeddedNetwork]:
        """A network in a fresh temporary directory, removed on exit unless ``keep``."""
        work = Path(tempfile.mkdtemp(prefix=prefix))
        session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=SEND_TIMEOUT_S))
        network = cls(work=work, session=session, agent_root=agent_root)
        try:
            yield network
        finally:
            try:
                await network.close()
            finally:
                await session.close()
                if not keep:
                    shutil.rmtree(work, ignore_errors=True)

    @property
    def agent_socket(self) -> Path:
        return self.work / AGENT_SOCKET

    @property
    def agent_token_file(self) -> Path:
        return self.work / "text-agent.token"

    def env(self, **extra: str) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items() if key != "ANET_DATA_DIR"}
        return env | extra

    async def _start(self, name: str, argv: list[str], log: Path,
                     env: dict[str, str]) -> Child:
        child = await spawn(name, argv, log=log, env=env)
        self.children.append(child)
        return child

    async def close(self) -> None:
        """Stop the nodes first (they would only reconnect), then the agent and the hub."""
        nodes = [child for child in self.children if child.name in self.nodes]
        others = [child for child in self.children if child.name not in self.nodes]
        await asyncio.gather(*(stop(child) for child in nodes))
        await asyncio.gather(*(stop(child) for child in reversed(others)))

    def child(self, name: str) -> Child:
        return next(child for child in self.children if child.name == name)

    async def first_exit(self) -> Child:
        """Wait until any process of the network exits; return it."""
        waits = {asyncio.ensure_future(child.process.wait()): child for child in self.children}
        try:
            done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for wait in waits:
                wait.cancel()
        return waits[next(iter(done))]

    async def until(self, check: Callable[[], Awaitable[T | None]], what: str,
                    child: Child | None = None, timeout: float = READY_TIMEOUT_S) -> T:
        """Poll ``check`` until it returns a value; fail with the child's log if it exits."""
        deadline = time.monotonic() + timeout
        while True:
            if child is not None and not child.running:
                raise AnetError("demo-process-exited",
                                f"{child.name} exited with status {child.process.returncode} "
                                f"while {what}", detail=child.log_tail())
            value = await check()
            if value is not None:
                return value
            if time.monotonic() > deadline:
                raise AnetError("demo-timeout", f"timed out after {timeout:.0f} s {what}",
                                detail=child.log_tail() if child else "")
            await asyncio.sleep(POLL_S)

    # --- the hub ---------------------------------------------------------------------------------

    async def start_hub(self, name: str = "the hub", *options: str) -> str:
        """``anet hub serve [options]`` on a free loopback port, in ``<work>/hub`` (the first)
        or a directory of its own; its URL once it is healthy. The first hub is the one nodes
        join."""
        data = "hub" if not self.hub_url else f"hub-{len(self.children)}"
        for attempt in range(1, HUB_PORT_ATTEMPTS + 1):
            port = free_port()  # another process may take it meanwhile: then try another
            child = await self._start(
                name, [sys.executable, "-m", "anet_core.cli.main", "hub", "serve",
                       "--listen", f"127.0.0.1:{port}", "--data", str(self.work / data),
                       *options],
                self.work / f"{data}.log", self.env())
            try:
                await self.until(lambda port=port: self._healthy(port), "starting", child)
            except AnetError:
                if attempt == HUB_PORT_ATTEMPTS or "cannot listen" not in child.log_tail():
                    raise
                self.children.remove(child)
                continue
            url = f"ws://127.0.0.1:{port}"
            self.hub_url = self.hub_url or url
            return url
        raise AssertionError("unreachable")

    async def _healthy(self, port: int) -> bool | None:
        try:
            async with self.session.get(f"http://127.0.0.1:{port}/v1/health") as response:
                return True if response.status == 200 else None
        except aiohttp.ClientError:
            return None

    # --- the example agent -----------------------------------------------------------------------

    async def start_agent(self) -> str:
        """The example text agent on a unix socket with a token file; its ``unix://`` URL."""
        if self.agent_root is None:
            self.agent_root = text_agent_root()
        write_private(self.agent_token_file, secrets.token_urlsafe(32) + "\n")
        pythonpath = os.pathsep.join(
            [str(self.agent_root), *filter(None, [os.environ.get("PYTHONPATH")])])
        child = await self._start(
            "the text agent", [sys.executable, "-m", "examples.text_agent",
                               "--socket", str(self.agent_socket),
                               "--token-file", str(self.agent_token_file)],
            self.work / "text-agent.log", self.env(PYTHONPATH=pythonpath))
        await self.until(self._agent_card, "starting", child)
        return f"unix://{self.agent_socket}"

    def agent_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.agent_token_file.read_text().strip()}"}

    async def _agent_card(self) -> dict[str, Any] | None:
        if not self.agent_socket.exists():
            return None
        try:
            async with aiohttp.ClientSession(
                    connector=aiohttp.UnixConnector(path=str(self.agent_socket))) as session, \
                    session.get("http://localhost/.well-known/agent-card.json",
                                headers=self.agent_headers()) as response:
                return await response.json() if response.status == 200 else None
        except aiohttp.ClientError:
            return None

    # --- nodes -----------------------------------------------------------------------------------

    def create_node(self, name: str, *, serve_with_agent: bool = False) -> DemoNode:
        """What ``anet init`` and ``anet join`` do, plus a name, skills and the backend."""
        paths = DataPaths(self.work / name)
        initialise(paths)
        raw = read_raw(paths.config)
        raw["hub"] = {"url": self.hub_url}
        raw["node"] = {"name": name, "description": f"{name}'s node in the anet demo"}
        if serve_with_agent:
            raw["node"] |= {"description": "Counts, summarises and transforms text (the example "
                                           "text agent, as a backend)",
                            "skills": TEXT_AGENT_SKILLS}
            raw.setdefault("modules", {})["backends"] = {"backends": [{
                "match": "*", "url": f"unix://{self.agent_socket}",
                "token_file": str(self.agent_token_file)}]}
        write_config(paths.config, raw)
        node = DemoNode(name, paths, Identity.load(paths.identity).aid)
        self.nodes[name] = node
        return node

    async def start_node(self, node: DemoNode, *, a2a: bool = True) -> dict[str, Any]:
        """Start the daemon (what ``anet up`` runs) and wait until it is registered at the hub."""
        node.paths.logs.mkdir(parents=True, exist_ok=True)
        node.child = await self._start(
            node.name, [sys.executable, "-m", "anet_core.daemon"], node.paths.log_file,
            self.env(ANET_DATA_DIR=str(node.paths.root)))
        pid = node.child.pid

        async def ready() -> dict[str, Any] | None:
            if not node.paths.control_addr.exists():
                return None
            try:
                status = await self.control(node, "GET", "/core/status")
            except (AnetError, aiohttp.ClientError, OSError):
                return None
            hub = status.get("hub") or {}
            return status if status.get("pid") == pid and hub.get("state") == "registered" \
                else None

        status = await self.until(ready, "starting and registering at the hub", node.child)
        if a2a:
            try:
                found = await self.control(node, "GET", "/a2a/endpoint")
            except AnetError as error:
                raise AnetError("demo-a2a-down", f"{node.name}'s local A2A endpoint is not up: "
                                f"{error.message}", detail=node.child.log_tail()) from None
            node.endpoint = A2AEndpoint(found["url"], found["agentsPath"],
                                        Path(found["tokenFile"]))
        return status

    async def control(self, node: DemoNode, method: str, path: str,
                      body: Any = None) -> Any:
        """A call on the node's control plane, as the CLI makes it; a refusal is the AnetError
        the route raised."""
        address = node.paths.control_addr.read_text().strip()
        token = node.paths.control_token.read_text().strip()
        async with self.session.request(method, f"http://{address}{path}", json=body,
                                        headers={"Authorization": f"Bearer {token}"}) as response:
            data = await response.read()
        try:
            return answer(method, path, response.status, response.content_type, data)
        except AnetError as error:
            error.message = f"{node.name}: {error.message}"
            raise

    async def trust(self, node: DemoNode, other: DemoNode) -> None:
        await self.control(node, "POST", "/tasks/trust/add", {"aid": other.aid})

    # --- the local A2A endpoint ------------------------------------------------------------------

    def a2a_headers(self, node: DemoNode) -> dict[str, str]:
        return {"Authorization": f"Bearer {node.a2a_token()}", "A2A-Version": "1.0"}

    async def listed(self, requester: DemoNode, aid: str) -> dict[str, Any]:
        """Wait until ``aid`` is listed on the requester's endpoint with a verified card."""

        async def entry() -> dict[str, Any] | None:
            async with self.session.get(requester.a2a.agents_url,
                                        headers=self.a2a_headers(requester)) as response:
                agents = (await response.json()).get("agents", [])
            return next((agent for agent in agents if agent["aid"] == aid
                         and agent.get("verification") == "VERIFIED"), None)

        return await self.until(entry, f"waiting for {requester.name} to see {aid}",
                                requester.child)

    async def jsonrpc_url(self, requester: DemoNode, aid: str) -> str:
        """Where the requester's endpoint takes JSON-RPC for ``aid``: the interface its proxy
        card names, as any A2A client finds it."""
        if aid not in requester.jsonrpc_urls:
            async with self.session.get(requester.agent_url(aid),
                                        headers=self.a2a_headers(requester)) as response:
                card = await response.json(content_type=None)
            url = next((interface.get("url") for interface in card.get("supportedInterfaces", [])
                        if interface.get("protocolBinding") == "JSONRPC"), None)
            if url is None:
                raise AnetError("demo-a2a-error", f"the proxy card of {aid} names no JSON-RPC "
                                "interface", detail=str(card))
            requester.jsonrpc_urls[aid] = url
        return requester.jsonrpc_urls[aid]

    async def jsonrpc(self, requester: DemoNode, aid: str, method: str,
                      params: dict[str, Any]) -> dict[str, Any]:
        """One JSON-RPC call on the requester's endpoint; the result, or the error as AnetError."""
        body = {"jsonrpc": "2.0", "id": uuid.uuid4().hex, "method": method, "params": params}
        async with self.session.post(await self.jsonrpc_url(requester, aid), json=body,
                                     headers=self.a2a_headers(requester)) as response:
            reply = await response.json(content_type=None)
        if "error" in reply:
            error = reply["error"]
            raise AnetError("demo-a2a-error", f"{method} answered {error.get('code')}: "
                            f"{error.get('message')}", detail=str(error.get("data", "")))
        return reply["result"]

    async def send_text(self, requester: DemoNode, aid: str, text: str,
                        timeout: float = SEND_TIMEOUT_S) -> dict[str, Any]:
        """SendMessage through the requester's endpoint; the task once it settles."""
        message = {"role": "ROLE_USER", "messageId": f"demo-{uuid.uuid4().hex}",
                   "parts": [{"text": text}]}
        result = await self.jsonrpc(requester, aid, "SendMessage", {"message": message})
        task = result.get("task")
        if task is None:
            raise AnetError("demo-a2a-error", "SendMessage answered a message, not a task",
                            detail=str(result))
        deadline = time.monotonic() + timeout
        while not TaskState(task["status"]["state"]).is_settled:
            if time.monotonic() > deadline:
                raise AnetError("demo-timeout", f"task {task['id']} still "
                                f"{task['status']['state']} after {timeout:.0f} s")
            await asyncio.sleep(POLL_S)
            task = await self.jsonrpc(requester, aid, "GetTask", {"id": task["id"]})
        return task
