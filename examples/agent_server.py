"""Serving an a2a-sdk agent the way anet expects a backend to be served.

Both example agents share this module: the Starlette app built from the official SDK routes, an
optional bearer token checked on every request (the agent card included), and a listener that is
either a unix socket (recommended for a backend) or a loopback TCP port, never anything wider.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import errno
import hmac
import logging
import os
import signal
import socket
import stat
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import uvicorn
from a2a.server.agent_execution import AgentExecutor
from a2a.server.request_handlers import DefaultRequestHandler
from a2a.server.routes import create_agent_card_routes, create_jsonrpc_routes, create_rest_routes
from a2a.server.tasks import InMemoryTaskStore
from a2a.types import (
    AgentCard,
    AgentInterface,
    HTTPAuthSecurityScheme,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.types import ASGIApp, Receive, Scope, Send

# A client on a unix socket still sends an HTTP Host; the card's URLs must name the same host the
# client used, and httpx over a socket uses whatever URL it is given, so "localhost" it is.
UNIX_SOCKET_BASE_URL = "http://localhost"
JSONRPC_PATH = "/a2a/jsonrpc"
REST_PATH = "/a2a/rest"
BEARER_SCHEME_NAME = "bearer"
# The card changes only when the agent is upgraded; a short max-age keeps clients honest.
CARD_CACHE_CONTROL = "public, max-age=300"
# Open streams get this long to finish when the server stops, then they are cut.
GRACEFUL_SHUTDOWN_S = 5
SOCKET_MODE = 0o660

logger = logging.getLogger(__name__)


def interfaces_for(base_url: str) -> list[AgentInterface]:
    """The JSON-RPC and HTTP+JSON interfaces of an agent served at ``base_url``."""
    return [
        AgentInterface(url=base_url + JSONRPC_PATH, protocol_binding="JSONRPC",
                       protocol_version="1.0"),
        AgentInterface(url=base_url + REST_PATH, protocol_binding="HTTP+JSON",
                       protocol_version="1.0"),
    ]


def declare_bearer_auth(card: AgentCard) -> None:
    """Say on the card that every call needs ``Authorization: Bearer <token>``."""
    card.security_schemes[BEARER_SCHEME_NAME].CopyFrom(SecurityScheme(
        http_auth_security_scheme=HTTPAuthSecurityScheme(
            scheme="Bearer", description="The token in the agent's --token-file")))
    card.security_requirements.append(
        SecurityRequirement(schemes={BEARER_SCHEME_NAME: StringList()}))


class BearerTokenMiddleware:
    """Refuse every HTTP request that does not carry the token, with 401 and a challenge.

    It wraps the whole app rather than single routes so that nothing (the card, an unknown path,
    a future route) is reachable without the token.
    """

    def __init__(self, app: ASGIApp, token: str, realm: str) -> None:
        self.app = app
        self.expected = f"Bearer {token}".encode()
        self.challenge = f'Bearer realm="{realm}"'

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not self._authorized(scope):
            refusal = JSONResponse(
                {"error": {"code": 401, "status": "UNAUTHENTICATED",
                           "message": "missing or wrong bearer token"}},
                status_code=401, headers={"WWW-Authenticate": self.challenge})
            await refusal(scope, receive, send)
            return
        await self.app(scope, receive, send)

    def _authorized(self, scope: Scope) -> bool:
        presented = [value for name, value in scope["headers"] if name == b"authorization"]
        # compare_digest: the time taken must not tell an attacker how much of a guess was right.
        return len(presented) == 1 and hmac.compare_digest(presented[0], self.expected)


def build_a2a_app(card: AgentCard, executor: AgentExecutor, token: str | None) -> Starlette:
    """The official SDK routes for one agent: card, JSON-RPC and HTTP+JSON, behind the token."""
    handler = DefaultRequestHandler(agent_executor=executor, task_store=InMemoryTaskStore(),
                                    agent_card=card)

    @contextlib.asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        yield
        await handler.aclose()  # no agent task outlives the server

    routes = [
        *create_agent_card_routes(agent_card=card, cache_control=CARD_CACHE_CONTROL),
        *create_jsonrpc_routes(request_handler=handler, rpc_url=JSONRPC_PATH),
        # The A2A TCK posts JSON-RPC to "<interface url>/"; serve both spellings.
        *create_jsonrpc_routes(request_handler=handler, rpc_url=JSONRPC_PATH + "/"),
        *create_rest_routes(request_handler=handler, path_prefix=REST_PATH),
    ]
    app = Starlette(routes=routes, lifespan=lifespan)
    if token is not None:
        app.add_middleware(BearerTokenMiddleware, token=token, realm=card.name)
    return app


def read_token_file(path: Path) -> str:
    """The bearer token in ``path``: one line, surrounding whitespace ignored."""
    token = path.read_text(encoding="utf-8").strip()
    if not token or any(ch.isspace() for ch in token):
        raise ValueError(f"token file {path} must hold one token without spaces; "
                         f"write one with: head -c 32 /dev/urandom | base64 > {path}")
    return token


@dataclass(frozen=True)
class Listener:
    """A bound, listening socket and the base URL clients use to reach it."""

    sock: socket.socket
    base_url: str
    socket_path: Path | None = None

    def close(self) -> None:
        self.sock.close()
        if self.socket_path is not None:
            with contextlib.suppress(FileNotFoundError):
                self.socket_path.unlink()


def bind_unix_socket(path: Path, mode: int = SOCKET_MODE) -> Listener:
    """Listen on a unix socket at ``path``, replacing a stale socket file but never a live one."""
    _remove_stale_socket(path)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        # Bind under a tight umask so that the socket is never, even briefly, more open than mode.
        previous_umask = os.umask(0o177)
        try:
            sock.bind(str(path))
        finally:
            os.umask(previous_umask)
        os.chmod(path, mode)
        sock.listen(socket.SOMAXCONN)
    except BaseException:
        sock.close()
        raise
    return Listener(sock=sock, base_url=UNIX_SOCKET_BASE_URL, socket_path=path)


def _remove_stale_socket(path: Path) -> None:
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(mode):
        raise FileExistsError(f"{path} exists and is not a socket; remove it or choose another "
                              "--socket path")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.connect(str(path))
    except ConnectionRefusedError:
        path.unlink()  # left behind by a server that died without cleaning up
        return
    finally:
        probe.close()
    raise OSError(errno.EADDRINUSE, f"another server is listening on {path}; stop it first")


def bind_loopback_port(port: int) -> Listener:
    """Listen on 127.0.0.1:``port`` (0 picks a free port); loopback only, by design."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.bind(("127.0.0.1", port))
        sock.listen(socket.SOMAXCONN)
    except BaseException:
        sock.close()
        raise
    bound_port = sock.getsockname()[1]
    return Listener(sock=sock, base_url=f"http://127.0.0.1:{bound_port}")


def bind_listener(socket_path: str | Path | None, port: int | None) -> Listener:
    """Exactly one of a unix socket path or a loopback port."""
    if (socket_path is None) == (port is None):
        raise ValueError("give exactly one of socket_path (a unix socket) or port (loopback TCP)")
    if socket_path is not None:
        return bind_unix_socket(Path(socket_path))
    assert port is not None
    return bind_loopback_port(port)


class _EmbeddedServer(uvicorn.Server):
    """A uvicorn server that leaves signals to its host (the CLI below, a test, ``anet demo``)."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


async def serve_app(app_for: Callable[[str], Starlette], listener: Listener,
                    ready: asyncio.Future[str] | None = None) -> None:
    """Serve ``app_for(listener.base_url)`` until cancelled, then shut down gracefully.

    ``ready`` gets the base URL once the socket listens: from then on connections queue in the
    kernel and are answered as soon as the server runs, so a caller may connect right away.
    """
    config = uvicorn.Config(app_for(listener.base_url), log_level="warning", lifespan="on",
                            timeout_graceful_shutdown=GRACEFUL_SHUTDOWN_S)
    server = _EmbeddedServer(config)
    running = asyncio.ensure_future(server.serve(sockets=[listener.sock]))
    where = f"unix:{listener.socket_path}" if listener.socket_path else listener.base_url
    logger.info("listening on %s", where)
    if ready is not None and not ready.done():
        ready.set_result(listener.base_url)
    try:
        await asyncio.shield(running)
    except asyncio.CancelledError:
        server.should_exit = True
        await running
        raise
    finally:
        listener.close()


AppFactory = Callable[[str | None, str], Starlette]
"""``build_app(token, base_url)`` of an example agent."""


async def serve_agent(build_app: AppFactory, *, socket_path: str | Path | None = None,
                      port: int | None = None, token_file: str | Path | None = None,
                      ready: asyncio.Future[str] | None = None) -> None:
    """Read the token, bind the listener, serve the agent until cancelled."""
    token = read_token_file(Path(token_file)) if token_file is not None else None
    listener = bind_listener(socket_path, port)
    await serve_app(lambda base_url: build_app(token, base_url), listener, ready)


class ServeFunction(Protocol):
    """The ``serve`` coroutine function of an example agent."""

    def __call__(self, *, socket_path: str | Path | None = None, port: int | None = None,
                 token_file: str | Path | None = None,
                 ready: asyncio.Future[str] | None = None) -> Awaitable[None]: ...


def run_cli(serve: ServeFunction, description: str, argv: list[str] | None = None) -> int:
    """Parse the serving options, serve until SIGINT or SIGTERM, return the exit status."""
    parser = argparse.ArgumentParser(description=description)
    where = parser.add_mutually_exclusive_group(required=True)
    where.add_argument("--socket", type=Path, help="listen on this unix socket (recommended)")
    where.add_argument("--port", type=int, help="listen on 127.0.0.1:PORT (0 picks a free port)")
    parser.add_argument("--token-file", type=Path,
                        help="require 'Authorization: Bearer <token>' with the token in this file")
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")

    async def main() -> None:
        # SIGINT is turned into cancellation by asyncio.run itself; SIGTERM (systemd) likewise.
        main_task = asyncio.current_task()
        assert main_task is not None
        asyncio.get_running_loop().add_signal_handler(signal.SIGTERM, main_task.cancel)
        await serve(socket_path=args.socket, port=args.port, token_file=args.token_file)

    try:
        asyncio.run(main())
    except (KeyboardInterrupt, asyncio.CancelledError):
        return 0
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    return 0
