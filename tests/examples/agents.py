"""The example agents in this event loop, each on a private unix socket, and their clients.

Clients are the official a2a-sdk client over ``httpx.AsyncHTTPTransport(uds=...)``, with the
bearer token as a default header so that it goes on every request, the card fetch included.
"""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import httpx
from a2a.client import Client, ClientConfig, ClientFactory
from a2a.types import Message, SendMessageConfiguration, SendMessageRequest, StreamResponse

from examples.agent_server import UNIX_SOCKET_BASE_URL, AppFactory, serve_agent

BINDINGS = ["JSONRPC", "HTTP+JSON"]
START_TIMEOUT_S = 5
STOP_TIMEOUT_S = 10
CALL_TIMEOUT_S = 10
# Short enough to keep the suite fast, long enough for a subscriber to attach while it works.
TEST_RESUBSCRIBE_HOLD_S = 0.6


@dataclass(frozen=True)
class RunningAgent:
    """An example agent serving on ``socket_path``, requiring ``token``."""

    socket_path: Path
    token: str

    def http(self, token: str | None = None, **headers: str) -> httpx.AsyncClient:
        """An httpx client on the agent's socket; ``token`` defaults to the right one."""
        auth = {"Authorization": f"Bearer {token or self.token}"}
        return httpx.AsyncClient(transport=httpx.AsyncHTTPTransport(uds=str(self.socket_path)),
                                 base_url=UNIX_SOCKET_BASE_URL, headers={**auth, **headers},
                                 timeout=CALL_TIMEOUT_S)

    @asynccontextmanager
    async def client(self, binding: str = "JSONRPC", streaming: bool = False
                     ) -> AsyncIterator[Client]:
        """The official SDK client for one binding, built from the agent's card."""
        async with self.http() as http:
            factory = ClientFactory(ClientConfig(httpx_client=http, streaming=streaming,
                                                 supported_protocol_bindings=[binding]))
            client = await factory.create_from_url(UNIX_SOCKET_BASE_URL)
            try:
                yield client
            finally:
                await client.close()


@asynccontextmanager
async def running(build_app: AppFactory, directory: Path) -> AsyncIterator[RunningAgent]:
    """The agent ``build_app`` makes, serving on a socket in ``directory`` with a fresh token."""
    token = secrets.token_urlsafe(24)
    token_file = directory / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    socket_path = directory / "agent.sock"
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    serving = asyncio.create_task(serve_agent(build_app, socket_path=socket_path,
                                              token_file=token_file, ready=ready))
    try:
        await asyncio.wait_for(asyncio.shield(ready), START_TIMEOUT_S)
        yield RunningAgent(socket_path=socket_path, token=token)
    finally:
        serving.cancel()
        async with asyncio.timeout(STOP_TIMEOUT_S):
            await asyncio.gather(serving, return_exceptions=True)


async def send(client: Client, message: Message, return_immediately: bool = False
               ) -> list[StreamResponse]:
    """Every event the client yields for one SendMessage (one, unless it streams)."""
    request = SendMessageRequest(
        message=message,
        configuration=SendMessageConfiguration(return_immediately=return_immediately))
    async with asyncio.timeout(CALL_TIMEOUT_S):
        return [event async for event in client.send_message(request)]
