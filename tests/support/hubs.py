"""A real hub server in this event loop on a free loopback port, real hub clients, and a node
speaking the frames by hand; cleaned up after each test. The fixtures are those of
``tests/hub`` and ``tests/link`` (their conftests import them). Needs the hub module."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import aiohttp
import pytest

pytest.importorskip("anet_hub")

from aiohttp import web

from anet_core.identity import Identity
from anet_core.link import JoinState
from anet_core.link.card import CardContent
from anet_core.link.client import HubClient
from anet_core.protocol.frames import REGISTER_CONTEXT, WS_PATH, registration_bytes
from anet_core.util.canonical import b64u
from anet_hub.app import STATE_KEY, HubConfig, HubState, build_app
from tests.support.waiting import eventually

STEP_TIMEOUT_S = 10.0


def loopback_socket(port: int = 0) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # A restarted hub binds its old port again while closed connections linger in TIME_WAIT.
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", port))
    sock.listen(128)
    sock.setblocking(False)
    return sock


@dataclass
class RunningHub:
    config: HubConfig
    runner: web.AppRunner | None = None
    port: int = 0

    @property
    def url(self) -> str:
        return f"ws://127.0.0.1:{self.port}"

    @property
    def http(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def state(self) -> HubState:
        assert self.runner is not None
        return self.runner.app[STATE_KEY]

    async def start(self) -> RunningHub:
        runner = web.AppRunner(build_app(self.config), access_log=None, shutdown_timeout=1.0)
        await runner.setup()
        sock = loopback_socket(self.port)
        await web.SockSite(runner, sock).start()
        self.runner, self.port = runner, sock.getsockname()[1]
        return self

    async def stop(self) -> None:
        if self.runner is not None:
            runner, self.runner = self.runner, None
            await runner.cleanup()


async def get_json(url: str) -> tuple[int, Any]:
    """A hub's HTTP read: status and JSON body."""
    async with aiohttp.ClientSession() as http, http.get(url) as response:
        return response.status, await response.json(content_type=None)


@dataclass
class Inbox:
    """A receiver that keeps what it is given; ``fail`` makes the next calls raise."""

    envelopes: list[dict[str, Any]] = field(default_factory=list)
    fail: int = 0
    changed: asyncio.Event = field(default_factory=asyncio.Event)

    async def __call__(self, envelope: dict[str, Any]) -> None:
        if self.fail:
            self.fail -= 1
            raise RuntimeError("receiver failed on purpose")
        self.envelopes.append(envelope)
        self.changed.set()

    async def wait_for(self, count: int) -> list[dict[str, Any]]:
        async with asyncio.timeout(STEP_TIMEOUT_S):
            while len(self.envelopes) < count:
                self.changed.clear()
                await self.changed.wait()
        return self.envelopes


@pytest.fixture
async def hub_factory(tmp_path: Path) -> AsyncIterator[Callable[..., Awaitable[RunningHub]]]:
    hubs: list[RunningHub] = []

    async def make(**overrides: Any) -> RunningHub:
        config = replace(HubConfig(data_dir=tmp_path / f"hub{len(hubs)}"), **overrides)
        hub = await RunningHub(config).start()
        hubs.append(hub)
        return hub

    yield make
    for hub in hubs:
        await hub.stop()


@pytest.fixture
async def hub(hub_factory: Callable[..., Awaitable[RunningHub]]) -> RunningHub:
    return await hub_factory()


@dataclass
class HubClients:
    """Hub clients of named nodes (``nodes.connect("alice", hub)``), closed after the test."""

    root: Path
    clients: list[HubClient] = field(default_factory=list)
    identities: dict[str, Identity] = field(default_factory=dict)

    def identity(self, name: str) -> Identity:
        if name not in self.identities:
            self.identities[name] = Identity.create(self.root / name / "identity")
        return self.identities[name]

    async def connect(self, name: str, hub: RunningHub, *, card: CardContent | None = None,
                      receiver: Inbox | None = None,
                      wait: JoinState | None = JoinState.REGISTERED) -> HubClient:
        client = HubClient(self.identity(name), url=hub.url,
                           pin_path=self.root / name / "hub-pin.json",
                           card=card or CardContent(name=name, description=f"the agent {name}"))
        if receiver is not None:
            client.set_receiver(receiver)
        self.clients.append(client)
        await client.start()
        if wait is not None:
            await eventually(lambda: client.status.state is wait, f"{name} is {wait.value}")
        return client


@pytest.fixture
async def nodes(tmp_path: Path) -> AsyncIterator[HubClients]:
    factory = HubClients(tmp_path / "nodes")
    yield factory
    for client in factory.clients:
        await client.close()


@dataclass
class RawNode:
    """A node speaking the frames by hand, to send what a correct client never would."""

    session: aiohttp.ClientSession
    sockets: list[aiohttp.ClientWebSocketResponse] = field(default_factory=list)

    async def open(self, hub: RunningHub) -> tuple[aiohttp.ClientWebSocketResponse,
                                                   dict[str, Any]]:
        ws = await self.session.ws_connect(hub.url + WS_PATH, max_msg_size=0)
        self.sockets.append(ws)
        challenge = await ws.receive_json(timeout=STEP_TIMEOUT_S)
        assert challenge["type"] == "challenge"
        return ws, challenge

    @staticmethod
    def register_frame(identity: Identity, challenge: dict[str, Any],
                       hub_url: str) -> dict[str, Any]:
        url = hub_url + WS_PATH
        signed = registration_bytes(hub_aid=challenge["hubAid"], hub_url=url,
                                    nonce=challenge["nonce"], ts=challenge["ts"],
                                    aid=identity.aid, key_seq=identity.key_seq)
        return {"type": "register", "aid": identity.aid, "history": identity.history,
                "hubUrl": url, "nonce": challenge["nonce"], "ts": challenge["ts"],
                "signature": b64u(identity.sign(signed, context=REGISTER_CONTEXT))}

    async def register(self, hub: RunningHub,
                       identity: Identity) -> aiohttp.ClientWebSocketResponse:
        ws, challenge = await self.open(hub)
        answer = await self.ask(ws, self.register_frame(identity, challenge, hub.url))
        assert answer["type"] == "registered", answer
        return ws

    @staticmethod
    async def ask(ws: aiohttp.ClientWebSocketResponse, frame: dict[str, Any]) -> dict[str, Any]:
        """Send a frame; the next answer that is not a delivery."""
        await ws.send_json(frame)
        async with asyncio.timeout(STEP_TIMEOUT_S):
            while True:
                answer = await ws.receive_json()
                if answer["type"] != "deliver":
                    return answer


@pytest.fixture
async def raw(http: aiohttp.ClientSession) -> AsyncIterator[RawNode]:
    node = RawNode(http)
    yield node
    for ws in node.sockets:
        await ws.close()


@pytest.fixture
def inbox_factory() -> Callable[..., Inbox]:
    return Inbox
