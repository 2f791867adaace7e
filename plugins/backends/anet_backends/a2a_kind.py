"""The built-in backend kind: A2A 1.0 JSON-RPC to a local server over a unix socket or TCP.

Every request (the card too) carries ``A2A-Version: 1.0`` (servers on the official SDK refuse
requests without it) and the bearer token of ``token_file``, read afresh each time so that a
rotated token is picked up. The token only goes to the origin of the configured ``url``,
whatever interface URL the backend's card names.

A card read for a forward is used again by the next forwards for :data:`CARD_REUSE_S`, as long
as the backend's socket is the same file (a restarted backend binds a new one) and the calls
succeed; a failed call, or the ``anet doctor`` and skills reads, read it afresh. The checks of
the socket and its listener run on every connection all the same (transport.py).

While the module runs, the forwards to one backend share one HTTP session (:func:`pooled_a2a`),
which keeps a unix-socket connection for the next forward (transport.py says how briefly, and
what is checked before it is used again); ``anet doctor`` and the skills reads open their own.
"""

from __future__ import annotations

import functools
import os
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp
from pydantic import ValidationError
from yarl import URL

from anet_backends.sse import EventTooLarge, sse_events
from anet_backends.transport import (
    CONNECT_TIMEOUT_S,
    CheckedTCPConnector,
    CheckedUnixConnector,
    socket_file,
)
from anet_core.api import (
    BackendError,
    BackendKind,
    BackendOpener,
    BackendStage,
    BackendTarget,
    CheckResult,
    CheckStatus,
)
from anet_core.wire import (
    AGENT_CARD_WELL_KNOWN_PATH,
    JSONRPC_BINDING,
    A2AMethod,
    AgentCard,
    SendMessageResponse,
    StreamResponse,
    error_from_jsonrpc,
    parse_json,
)

A2A_VERSION = "1.0"
MAX_BODY_BYTES = 16 * 1024 * 1024
"""Largest answer (or stream event) read from a backend; a larger one fails the forward."""
UNIX_ORIGIN = URL("http://localhost")
"""Requests over a unix socket name this host; only the path of a card's URL is used."""
CARD_REUSE_S = 30.0
"""How long a card read for a forward serves the next forwards (see the module docstring)."""
MAX_KEPT = 256
"""How many backends the caches below keep something of (cards, tokens, socket paths)."""


@dataclass(frozen=True)
class _ReadCard:
    card: AgentCard
    rpc_url: URL
    """Where the card sends JSON-RPC calls (``A2AChannel._endpoint``)."""
    socket: tuple[int, int] | None
    """(device, inode) of the unix socket the card came through; None over TCP."""
    read_at: float


_cards: dict[BackendTarget, _ReadCard] = {}
"""The card each backend answered last, for the forwards that follow (bounded, see below)."""


@functools.lru_cache(maxsize=MAX_KEPT)
def _socket_path(target: BackendTarget) -> Path:
    return Path(URL(target.url).path)


def _socket_file(target: BackendTarget) -> tuple[int, int] | None:
    return socket_file(_socket_path(target)) if target.scheme == "unix" else None


@dataclass(frozen=True)
class _ReadToken:
    token: str
    stamp: tuple[int, int, int, int]
    """(device, inode, size, mtime) of the file it was read from."""


_tokens: dict[str, _ReadToken] = {}
"""Each token file as last read; read again once the file is another or has changed."""


def _token(path: str) -> str:
    """The bearer token in ``path``, as it is now: the file is stat'ed on every call and read
    again when it changed (a token can be replaced while the node runs)."""
    info = os.stat(path)
    stamp = (info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns)
    read = _tokens.get(path)
    if read is None or read.stamp != stamp:
        if len(_tokens) >= MAX_KEPT:
            _tokens.clear()
        read = _tokens[path] = _ReadToken(Path(path).read_text(encoding="utf-8").strip(), stamp)
    return read.token


def _reusable_card(target: BackendTarget) -> _ReadCard | None:
    read = _cards.get(target)
    if read is None or time.monotonic() - read.read_at > CARD_REUSE_S or \
            read.socket != _socket_file(target):
        return None
    return read


def _keep_card(target: BackendTarget, card: AgentCard, rpc_url: URL) -> None:
    if len(_cards) >= MAX_KEPT:
        _cards.clear()
    _cards[target] = _ReadCard(card, rpc_url, _socket_file(target), time.monotonic())


def _fail(stage: BackendStage, reason: str) -> BackendError:
    return BackendError(stage, reason)


class A2AChannel:
    """One backend's card and JSON-RPC endpoint, reached through a checking connector."""

    def __init__(self, target: BackendTarget, session: aiohttp.ClientSession,
                 card_url: URL) -> None:
        self._target = target
        self._session = session
        self._card_url = card_url
        self.card: AgentCard | None = None
        self._rpc_url = card_url

    @property
    def streaming(self) -> bool:
        return bool(self.card and self.card.capabilities.streaming)

    def _headers(self, **extra: str) -> dict[str, str]:
        headers = {"A2A-Version": A2A_VERSION, **extra}
        if self._target.token_file is not None:
            try:
                token = _token(self._target.token_file)
            except OSError as error:
                raise _fail(BackendStage.REFUSED, f"token_file {self._target.token_file} cannot "
                                                  f"be read: {error.strerror}") from None
            headers["Authorization"] = f"Bearer {token}"
        return headers

    def use_card(self, card: AgentCard, rpc_url: URL | None = None) -> None:
        """Call as ``card`` says; ``rpc_url``: its endpoint, when known from an earlier read."""
        self._rpc_url = rpc_url or self._endpoint(card)
        self.card = card

    @property
    def rpc_url(self) -> URL:
        return self._rpc_url

    async def load_card(self) -> AgentCard:
        """Read the card; every failure is before the message, so UNREACHABLE (retried)."""
        try:
            async with self._session.get(self._card_url, headers=self._headers()) as response:
                if response.status != 200:
                    raise _fail(BackendStage.UNREACHABLE,
                                f"the card request to {self._target.url} answered HTTP "
                                f"{response.status}")
                body = await _read_limited(response, BackendStage.UNREACHABLE)
        except (aiohttp.ClientError, TimeoutError) as error:
            raise _fail(BackendStage.UNREACHABLE,
                        f"the card request failed: {type(error).__name__}: {error}") from None
        try:
            card = AgentCard.from_wire_json(body)
        except (ValidationError, ValueError) as error:
            raise _fail(BackendStage.UNREACHABLE, f"the backend's card is not an A2A 1.0 card: "
                                                  f"{_first_line(error)}") from None
        self.use_card(card)
        return card

    def _endpoint(self, card: AgentCard) -> URL:
        for interface in card.supported_interfaces:
            if (interface.protocol_binding == JSONRPC_BINDING
                    and interface.protocol_version.split(".")[0] == "1"):
                url = self._card_url.join(URL(interface.url))
                if self._target.scheme == "unix":
                    return UNIX_ORIGIN.with_path(url.path).with_query(url.query)
                if url.origin() != self._card_url.origin():
                    raise _fail(BackendStage.REFUSED,
                                f"the card names {url.origin()} for JSON-RPC, not the origin of "
                                f"url {self._target.url}; the token is sent nowhere else")
                return url
        raise _fail(BackendStage.UNREACHABLE,
                    "the backend's card lists no JSONRPC interface with protocol version 1.x")

    async def send(self, message: dict[str, Any], metadata: dict[str, Any], *,
                   blocking: bool = False) -> AsyncIterator[dict[str, Any]]:
        # A requester that waits for the end only gets it from one SendMessage: no event
        # stream for the backend to write and for this node to read (docs/backends.md).
        streaming = self.streaming and not blocking
        method = A2AMethod.SEND_STREAMING_MESSAGE if streaming else A2AMethod.SEND_MESSAGE
        params = {"message": message, "configuration": {}, "metadata": metadata}
        async for result in self._call(method, params):
            try:
                if method is A2AMethod.SEND_STREAMING_MESSAGE:
                    StreamResponse.from_wire(result)
                else:
                    SendMessageResponse.from_wire(result)
            except ValidationError as error:
                raise _fail(BackendStage.WRITTEN, f"the backend's answer is not valid A2A: "
                                                  f"{_first_line(error)}") from None
            yield result

    async def cancel(self, task_id: str) -> None:
        async for _ in self._call(A2AMethod.CANCEL_TASK, {"id": task_id}):
            pass

    async def _call(self, method: A2AMethod,
                    params: dict[str, Any]) -> AsyncIterator[dict[str, Any]]:
        """POST one JSON-RPC call; yield its result, or each result of an event stream."""
        request_id = uuid.uuid4().hex
        body = {"jsonrpc": "2.0", "id": request_id, "method": method.value, "params": params}
        accept = "text/event-stream" if method is A2AMethod.SEND_STREAMING_MESSAGE \
            else "application/json"
        headers = self._headers(Accept=accept)
        try:
            async with self._session.post(self._rpc_url, json=body, headers=headers) as response:
                if response.status == 503:
                    raise _fail(BackendStage.BUSY, "the backend answered HTTP 503")
                if response.status != 200:
                    raise _fail(BackendStage.WRITTEN,
                                f"the backend answered HTTP {response.status} to {method}")
                if response.content_type == "text/event-stream":
                    async for name, data in sse_events(response.content,
                                                       max_event_bytes=MAX_BODY_BYTES):
                        yield _result(data.encode(), request_id, event=name)
                    return
                yield _result(await _read_limited(response, BackendStage.WRITTEN), request_id)
        except (aiohttp.ClientError, TimeoutError) as error:
            raise _fail(BackendStage.WRITTEN, f"{method} to the backend broke off: "
                                              f"{type(error).__name__}: {error}") from None
        except EventTooLarge as error:
            raise _fail(BackendStage.WRITTEN, str(error)) from None


def _result(body: bytes, request_id: str, *, event: str = "message") -> dict[str, Any]:
    """The ``result`` of a JSON-RPC response, or the backend's error as a BackendError."""
    try:
        document = parse_json(body)
    except ValueError as error:
        raise _fail(BackendStage.WRITTEN, f"the backend's answer is not JSON: {error}") from None
    if not isinstance(document, dict) or document.get("jsonrpc") != "2.0":
        raise _fail(BackendStage.WRITTEN, "the backend's answer is not a JSON-RPC response")
    if isinstance(document.get("error"), dict) or event == "error":
        error = error_from_jsonrpc(document.get("error") or {})
        raise _fail(BackendStage.WRITTEN, f"the backend answered {error.kind.spec.sdk_name}: "
                                          f"{error.message}")
    if document.get("id") != request_id or not isinstance(document.get("result"), dict):
        raise _fail(BackendStage.WRITTEN, "the backend's JSON-RPC response has the wrong id or "
                                          "no result object")
    return document["result"]


async def _read_limited(response: aiohttp.ClientResponse, stage: BackendStage) -> bytes:
    if response.content_length is not None and response.content_length > MAX_BODY_BYTES:
        raise _fail(stage, f"the backend's answer is {response.content_length} bytes, more than "
                           f"{MAX_BODY_BYTES}")
    body = bytearray()
    async for chunk in response.content.iter_chunked(64 * 1024):
        body += chunk
        if len(body) > MAX_BODY_BYTES:
            raise _fail(stage, f"the backend's answer is larger than {MAX_BODY_BYTES} bytes")
    return bytes(body)


def _first_line(error: Exception) -> str:
    return str(error).splitlines()[0] if str(error) else type(error).__name__


def _plan(target: BackendTarget, *, keep_alive: bool = False
          ) -> tuple[aiohttp.BaseConnector, URL]:
    """The connector and the card URL for ``target``'s url."""
    if target.scheme == "unix":
        return (CheckedUnixConnector(target, _socket_path(target), keep_alive=keep_alive),
                UNIX_ORIGIN.with_path(AGENT_CARD_WELL_KNOWN_PATH))
    url = URL(target.url)
    if not url.path.endswith(".json"):
        url = url.with_path(url.path.rstrip("/") + AGENT_CARD_WELL_KNOWN_PATH)
    return CheckedTCPConnector(), url


def _session(target: BackendTarget, *, keep_alive: bool = False
             ) -> tuple[aiohttp.ClientSession, URL]:
    connector, card_url = _plan(target, keep_alive=keep_alive)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=CONNECT_TIMEOUT_S)
    return aiohttp.ClientSession(connector=connector, timeout=timeout), card_url


@asynccontextmanager
async def open_a2a(target: BackendTarget, *, fresh_card: bool = True
                   ) -> AsyncIterator[A2AChannel]:
    """Check and connect the backend in a session of its own, read its card (``fresh_card``
    False: the card of the last forward when it may be used again), and yield the channel."""
    session, card_url = _session(target)
    async with session, _channel(target, session, card_url, fresh_card=fresh_card) as channel:
        yield channel


@asynccontextmanager
async def _channel(target: BackendTarget, session: aiohttp.ClientSession, card_url: URL, *,
                   fresh_card: bool) -> AsyncIterator[A2AChannel]:
    channel = A2AChannel(target, session, card_url)
    read = None if fresh_card else _reusable_card(target)
    if read is None:
        _keep_card(target, await channel.load_card(), channel.rpc_url)
    else:
        channel.use_card(read.card, read.rpc_url)
    try:
        yield channel
    except BaseException:
        _cards.pop(target, None)  # whatever went wrong, the next forward reads the card
        raise


def open_a2a_forward(target: BackendTarget) -> AbstractAsyncContextManager[A2AChannel]:
    """:func:`open_a2a` for a forward: the card of the last forward serves when it may."""
    return open_a2a(target, fresh_card=False)


@asynccontextmanager
async def pooled_a2a() -> AsyncIterator[BackendOpener]:
    """While the backends module runs: the forwards to each backend share one session."""
    sessions: dict[BackendTarget, tuple[aiohttp.ClientSession, URL]] = {}

    def open_forward(target: BackendTarget) -> AbstractAsyncContextManager[A2AChannel]:
        if target not in sessions:
            sessions[target] = _session(target, keep_alive=True)
        session, card_url = sessions[target]
        return _channel(target, session, card_url, fresh_card=False)

    try:
        yield open_forward
    finally:
        for session, _ in sessions.values():
            await session.close()


async def diagnose_a2a(target: BackendTarget) -> CheckResult:
    """Path trust, listener account, reachability and the card, as ``anet doctor`` shows them."""
    try:
        async with open_a2a(target) as channel:
            card = await channel.load_card()
    except BackendError as error:
        hint = ("fix the socket's directories or expected_user" if error.stage
                is BackendStage.REFUSED else "start the backend, or check url and token_file")
        return CheckResult(CheckStatus.FAIL, f"{error.stage.value}: {error.reason}", hint=hint)
    summary = (f"card {card.name!r} readable, "
               f"{'streaming' if channel.streaming else 'not streaming'}")
    if target.peer_check == "path-only":
        return CheckResult(CheckStatus.WARN, summary + "; listener account NOT checked "
                           "(peer_check: path-only)",
                           hint="remove peer_check: path-only where the platform can tell the "
                                "listener's account")
    checked = "listener account checked" if target.scheme == "unix" else "reachable"
    return CheckResult(CheckStatus.OK, f"{summary}, {checked}")


async def skills_a2a(target: BackendTarget) -> list[dict[str, Any]]:
    """The skills on the backend's agent card, as the node's network card lists skills."""
    async with open_a2a(target) as channel:
        card = await channel.load_card()
    return [{"id": skill.id, "name": skill.name, "description": skill.description,
             "tags": list(skill.tags)} for skill in card.skills]


A2A_KIND = BackendKind(name="a2a", schemes=("unix", "http", "https"), open=open_a2a_forward,
                       diagnose=diagnose_a2a, skills=skills_a2a, pooled=pooled_a2a,
                       module="backends")
