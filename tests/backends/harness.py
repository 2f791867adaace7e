"""What the backends tests drive the forwarder with: a responder double that records what
reaches the requester, inbound tasks, a forwarder for one backend, misbehaving aiohttp servers and
a listener under another OS account. (The official a2a-sdk backend is
``tests.support.sdk_backend``.) Needs the backends module."""

from __future__ import annotations

import asyncio
import sys
import uuid
from collections.abc import AsyncIterator, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anet_backends.a2a_kind import A2A_KIND
from anet_backends.config import Backend, Retry
from anet_backends.forward import BackendTask, Forwarder
from anet_backends.retry import RetryPlan
from anet_core.records import BackendOpener, InboundTask
from tests.support.messages import user_message

PEER = "p" * 32


@dataclass
class Recorder:
    """A responder double: what the requester would see, in order."""

    events: list[tuple[str, Any]] = field(default_factory=list)
    replies: asyncio.Queue[dict[str, Any]] = field(default_factory=asyncio.Queue)
    cancelled: asyncio.Event = field(default_factory=asyncio.Event)
    request_metadata: dict[str, Any] = field(default_factory=dict)
    blocking: bool = False
    appended: list[bool] = field(default_factory=list)
    """``append`` of each artifact sent before the end."""
    completed_with: list[list[str]] = field(default_factory=list)
    """The ids of the artifacts each completion carried."""
    recorded: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    """The evidence records the module made, in order."""

    def record(self, kind: str, data: dict[str, Any]) -> None:
        self.recorded.append((kind, data))

    async def working(self, message: dict[str, Any] | None = None) -> None:
        self.events.append(("working", message))

    async def artifact(self, artifact: dict[str, Any], *, append: bool = False,
                       last_chunk: bool = True) -> None:
        self.events.append(("artifact", artifact))
        self.appended.append(append)

    async def input_required(self, message: dict[str, Any] | str) -> None:
        self.events.append(("input_required", message))

    async def next_message(self) -> dict[str, Any]:
        reply = await self.replies.get()
        # A reply queued as (message, request metadata[, blocking]) brings them, as the real one.
        if isinstance(reply, tuple):
            reply, self.request_metadata, *rest = reply
            self.blocking = bool(rest and rest[0])
        return reply

    async def complete(self, message: dict[str, Any] | None = None,
                       artifacts: Iterable[dict[str, Any]] = ()) -> None:
        # Artifacts that come with the end reach the requester as those sent before it.
        artifacts = list(artifacts)
        self.events.extend(("artifact", artifact) for artifact in artifacts)
        self.events.append(("complete", message))
        self.completed_with.append([artifact["artifactId"] for artifact in artifacts])

    async def reply_message(self, message: dict[str, Any]) -> None:
        self.events.append(("reply_message", message))

    async def fail(self, reason: str, message: dict[str, Any] | None = None) -> None:
        self.events.append(("fail", reason))

    async def to_inbox(self, reason: str) -> None:
        self.events.append(("to_inbox", reason))

    def kinds(self) -> list[str]:
        return [kind for kind, _ in self.events]

    def texts(self, kind: str) -> list[str]:
        out = []
        for name, value in self.events:
            if name == kind and isinstance(value, dict):
                out.extend(part["text"] for part in value.get("parts", []) if "text" in part)
        return out


def inbound(text: str, *, trusted: bool = True, skill: str | None = None,
            blocking: bool = False) -> InboundTask:
    """A task from the requester ``PEER``, as the provider offers it to the modules."""
    message = user_message(text, f"m-{uuid.uuid4().hex}", contextId="requester-ctx")
    return InboundTask(task_id=uuid.uuid4().hex, context_id=f"ctx-{uuid.uuid4().hex[:8]}",
                       peer_aid=PEER, trusted=trusted, skill=skill, message=message,
                       blocking=blocking)


@dataclass
class Harness:
    """A forwarder for one backend, and the evidence records of the tasks it served."""

    forwarder: Forwarder
    evidence: list[tuple[str, dict[str, Any]]]

    async def serve(self, task: InboundTask, responder: Recorder | None = None,
                    timeout: float = 20) -> Recorder:
        responder = responder or Recorder()
        responder.request_metadata = dict(task.metadata or {})  # as the real Responder starts
        responder.blocking = task.blocking
        responder.recorded = self.evidence
        async with asyncio.timeout(timeout):
            await self.forwarder.serve(task, responder)
        return responder

    def evidence_kinds(self) -> list[str]:
        return [kind for kind, _ in self.evidence]


def make_harness(url: str, *, token_file: Path | None = None, give_up_after: str = "0",
                 max_interval: str = "1s", idle_timeout_s: float = 10.0,
                 open: BackendOpener | None = None, **backend: Any) -> Harness:
    """``open``: what the forwards use instead of the kind's own (``pooled_a2a``'s, as while
    the module runs); by default each forward has a session of its own."""
    config = Backend(match="*", url=url, token_file=str(token_file) if token_file else None,
                     **backend)
    retry = RetryPlan.of(Retry(max_interval=max_interval, give_up_after=give_up_after))
    tasks: dict[str, BackendTask] = {}
    return Harness(Forwarder(config.target(), A2A_KIND, retry, uncounted,
                             idle_timeout_s=idle_timeout_s, tasks=tasks, open=open), [])


def uncounted(kind: str, backend: str) -> None:
    """A forwarder's ``count`` without the node's metrics."""


# --- a listener under another account ------------------------------------------------------


RAW_LISTENER = r"""
import os, socket, sys
kind, address, log, uid = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
if kind == "unix":
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(address)
    os.chmod(address, 0o666)
else:
    sock = socket.socket(socket.AF_INET)
    sock.bind(("127.0.0.1", int(address)))
out = open(log, "ab", buffering=0)    # opened as root: the log stays where the test reads it
os.setgid(uid); os.setuid(uid)         # the listener's account is fixed at listen()
sock.listen()
print("ready", flush=True)
while True:
    conn, _ = sock.accept()
    conn.settimeout(2)
    try:
        data = conn.recv(65536)
    except OSError:
        data = b""
    out.write(data)
    conn.close()
"""


@asynccontextmanager
async def raw_listener(kind: str, address: str, uid: int, log: Path) -> AsyncIterator[None]:
    """A process that binds as root, listens as ``uid`` and logs every byte it receives."""
    log.write_bytes(b"")
    process = await asyncio.create_subprocess_exec(
        sys.executable, "-c", RAW_LISTENER, kind, address, str(log), str(uid),
        stdout=asyncio.subprocess.PIPE)
    try:
        async with asyncio.timeout(15):
            assert (await process.stdout.readline()).strip() == b"ready"  # type: ignore[union-attr]
        yield
    finally:
        process.kill()
        await process.wait()


# --- misbehaving backends (aiohttp) ------------------------------------------------------------

CARD = {"name": "fake", "description": "fake backend", "version": "1.0.0",
        "supportedInterfaces": [{"url": "http://localhost/rpc", "protocolBinding": "JSONRPC",
                                 "protocolVersion": "1.0"}],
        "capabilities": {}, "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": [{"id": "x", "name": "x", "description": "x", "tags": ["x"]}]}


def completed(request_id: Any, text: str = "done") -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "result": {"task": {
        "id": "backend-task", "contextId": "c", "status": {"state": "TASK_STATE_COMPLETED"},
        "artifacts": [{"artifactId": "a1", "parts": [{"text": text}]}]}}}


@dataclass
class FakeBackend:
    posts: list[dict[str, Any]] = field(default_factory=list)
    authorizations: list[str | None] = field(default_factory=list)
    """The Authorization header of each JSON-RPC POST."""


@asynccontextmanager
async def fake_backend(path: Path, answer: Any, *,
                       streaming: bool = False) -> AsyncIterator[FakeBackend]:
    """An aiohttp server on ``path``: a valid card (``streaming`` says so on it, and the
    forwarder then sends SendStreamingMessage), and ``answer(request, body, n)`` for each
    JSON-RPC POST (n counts the POSTs from 1)."""
    from aiohttp import web

    state = FakeBackend()

    async def card(request: web.Request) -> web.Response:
        return web.json_response(CARD | {"capabilities": {"streaming": streaming}})

    async def rpc(request: web.Request) -> web.StreamResponse:
        body = await request.json()
        state.posts.append(body)
        state.authorizations.append(request.headers.get("Authorization"))
        return await answer(request, body, len(state.posts))

    app = web.Application()
    app.router.add_get("/.well-known/agent-card.json", card)
    app.router.add_post("/rpc", rpc)
    runner = web.AppRunner(app, shutdown_timeout=0.5)
    await runner.setup()
    await web.UnixSite(runner, str(path)).start()
    try:
        yield state
    finally:
        await runner.cleanup()
