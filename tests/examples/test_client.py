"""examples/client.py against a stand-in for the node's local endpoint that fronts the text agent.

The stand-in serves what the client uses of the real endpoint: the agent list, the proxy card at
the agent's URL, and the agent's bindings below it, all behind the bearer token, on loopback.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from a2a.server.routes import create_agent_card_routes
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Mount, Route

from examples import text_agent
from examples.agent_server import BearerTokenMiddleware, bind_loopback_port, serve_app
from examples.text_agent.card import build_card
from tests.examples.agents import START_TIMEOUT_S, STOP_TIMEOUT_S

pytestmark = pytest.mark.timeout(60)

REPO_ROOT = Path(__file__).resolve().parents[2]
AID = "b" * 26
CLIENT_TIMEOUT_S = 30


def stand_in_endpoint(token: str, base_url: str) -> Starlette:
    agent_url = f"{base_url}/a2a/v1/agents/{AID}"
    agent = text_agent.build_app(None, base_url=agent_url)  # the token is checked outside

    async def list_agents(_: Request) -> JSONResponse:
        return JSONResponse({"agents": [{"aid": AID, "url": agent_url, "cardUrl": agent_url,
                                         "verification": "VERIFIED", "keyState": "fresh",
                                         "name": "Text Agent", "charge": "free"}]})

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        async with agent.router.lifespan_context(agent):  # a Mount does not run it
            yield

    app = Starlette(
        routes=[Route("/a2a/v1/agents", list_agents),
                *create_agent_card_routes(build_card(agent_url, requires_token=True),
                                          card_url=f"/a2a/v1/agents/{AID}"),
                Mount(f"/a2a/v1/agents/{AID}", app=agent)],
        lifespan=lifespan)
    app.add_middleware(BearerTokenMiddleware, token=token, realm="stand-in")
    return app


@contextlib.asynccontextmanager
async def node_data_dir(tmp_path: Path) -> AsyncIterator[tuple[Path, str]]:
    """A data directory whose a2a files point at a running stand-in endpoint."""
    token = secrets.token_urlsafe(24)
    listener = bind_loopback_port(0)
    state = tmp_path / "node" / "modules" / "a2a"
    state.mkdir(parents=True)
    (state / "a2a_addr.txt").write_text(listener.base_url.removeprefix("http://") + "\n")
    (state / "a2a_token.txt").write_text(token + "\n")
    ready: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    serving = asyncio.create_task(serve_app(lambda base: stand_in_endpoint(token, base),
                                            listener, ready))
    try:
        await asyncio.wait_for(asyncio.shield(ready), START_TIMEOUT_S)
        yield tmp_path / "node", token
    finally:
        serving.cancel()
        async with asyncio.timeout(STOP_TIMEOUT_S):
            await asyncio.gather(serving, return_exceptions=True)


async def run_client(data_dir: Path, *args: str) -> tuple[int, str, str]:
    process = await asyncio.create_subprocess_exec(
        sys.executable, str(REPO_ROOT / "examples" / "client.py"), *args,
        env={"ANET_DATA_DIR": str(data_dir), "PATH": "/usr/bin:/bin"},
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE)
    try:
        async with asyncio.timeout(CLIENT_TIMEOUT_S):
            stdout, stderr = await process.communicate()
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
    assert process.returncode is not None
    return process.returncode, stdout.decode(), stderr.decode()


async def test_client_lists_resolves_sends_streams_and_cancels(tmp_path: Path) -> None:
    async with node_data_dir(tmp_path) as (data_dir, token):
        status, out, err = await run_client(data_dir, "--text", "summarize 1: One. Two two.",
                                            "--stream", "--cancel")
    assert status == 0, err
    assert f"  {AID}  Text Agent  VERIFIED free" in out
    assert f"/a2a/v1/agents/{AID}/a2a/jsonrpc" in out  # the card's interfaces
    assert "  skill summarize: Extractive summary" in out
    assert "COMPLETED\n  artifact reply: Two two.\n  artifact summarize: {" in out
    streamed = out.split("== stream")[1]
    assert "status WORKING\nartifact reply: Two two." in streamed
    assert "status COMPLETED" in streamed
    assert "cancel refused: TaskNotCancelableError" in out or "canceled: task" in out
    assert token not in out + err


async def test_client_cancels_a_task_that_waits_for_input(tmp_path: Path) -> None:
    async with node_data_dir(tmp_path) as (data_dir, _):
        status, out, err = await run_client(data_dir, "--aid", AID, "--text", "summarize",
                                            "--cancel")
    assert status == 0, err
    assert "INPUT_REQUIRED\n  says: Send the text to summarise." in out
    assert "canceled: task" in out and out.rstrip().endswith("CANCELED")


async def test_client_says_how_to_start_the_node_when_files_are_missing(tmp_path: Path) -> None:
    status, _, err = await run_client(tmp_path / "nowhere")
    assert status == 2
    assert "a2a_addr.txt does not exist: start the node with `anet up`" in err
