"""The outbound A2A client of direct peers: every HTTP request to a peer goes through here.

Each request: the URL checked (:func:`check_url`), its host resolved once and every address
checked (:func:`pin`), the connection made to exactly those addresses, no redirect followed, no
proxy from the environment, the body read up to ``max_response_bytes``, the whole request
bounded by ``request_timeout_secs``, and an evidence record written (what was called, how it
ended; never a token or a message).
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

import aiohttp
from pydantic import SecretStr
from yarl import URL

from anet_a2a.config import ENV_REFERENCE, A2AConfig
from anet_a2a.peers.guard import (
    HostPolicy,
    PeerError,
    PinnedResolver,
    Resolver,
    check_url,
    pin,
    system_resolver,
)

log = logging.getLogger(__name__)

A2A_VERSION = "1.0"
PEER_CALL = "a2a.peer_call"
"""Evidence record of one request to a direct peer."""

Record = Callable[[str, dict[str, Any]], Awaitable[None]]


@dataclass(frozen=True)
class ClientPolicy:
    hosts: HostPolicy
    max_response_bytes: int
    request_timeout_s: float

    @classmethod
    def of(cls, config: A2AConfig) -> ClientPolicy:
        return cls(HostPolicy(config.allow_private_hosts, tuple(config.allowed_private_hosts)),
                   config.max_response_bytes, config.request_timeout_secs)


def resolve_token(peer: str, token: SecretStr) -> str | None:
    """The bearer token to send to ``peer`` now: ``${VAR}`` from the environment, a literal as
    it is, None for an empty value (no Authorization header)."""
    value = token.get_secret_value()
    if not value:
        return None
    reference = ENV_REFERENCE.match(value)
    if reference is None:
        return value
    resolved = os.environ.get(reference.group(1), "")
    if not resolved:
        raise PeerError("peer-token-unresolved",
                        f"the token of peer {peer!r} is ${{{reference.group(1)}}}, which is not "
                        "set in the daemon's environment",
                        hint=f"export {reference.group(1)} before `anet up`, or set the token to "
                             '"" for a peer that needs none')
    return resolved


@dataclass(frozen=True)
class PeerResponse:
    status: int
    body: bytes
    content_type: str

    def json(self, what: str) -> Any:
        try:
            return json.loads(self.body)
        except ValueError:
            shown = self.content_type or "no content type"
            raise PeerError("peer-bad-answer",
                            f"{what} is not JSON ({shown}, {len(self.body)} bytes)") from None


@dataclass(frozen=True)
class RpcFailure:
    """A JSON-RPC error object a peer answered with."""

    code: int
    message: str
    reason: str | None


class PeerRpcError(PeerError):
    def __init__(self, failure: RpcFailure, url: str) -> None:
        super().__init__("peer-rpc-error", f"{url} answered JSON-RPC error {failure.code}: "
                                           f"{failure.message[:300]}")
        self.failure = failure


def _rpc_failure(error: Any) -> RpcFailure:
    """The code, message and A2A reason of an error object: ``data`` may be the spec's list of
    ErrorInfo details or a single object with ``reason``."""
    if not isinstance(error, dict) or not isinstance(error.get("code"), int):
        return RpcFailure(code=-32603, message=f"malformed error object {str(error)[:200]}",
                          reason=None)
    data = error.get("data")
    details = data if isinstance(data, list) else [data]
    reason = next((item["reason"] for item in details
                   if isinstance(item, dict) and isinstance(item.get("reason"), str)), None)
    return RpcFailure(code=error["code"], message=str(error.get("message", "")), reason=reason)


class PeerClient:
    """One per node; ``resolver`` and ``record`` are injectable (tests, evidence)."""

    def __init__(self, policy: ClientPolicy, *, resolver: Resolver = system_resolver,
                 record: Record | None = None) -> None:
        self.policy = policy
        self._resolver = resolver
        self._record = record
        self._ids = itertools.count(1)

    async def request(self, method: str, url: str | URL, *, peer: str, operation: str,
                      token: str | None = None, body: Any = None) -> PeerResponse:
        """One HTTP request under every rule of this module (see the module docstring)."""
        checked = check_url(str(url))
        headers = {"A2A-Version": A2A_VERSION, "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Bearer {token}"
        outcome, status = "ok", None
        try:
            async with asyncio.timeout(self.policy.request_timeout_s):
                pinned = await pin(checked, self.policy.hosts, self._resolver)
                connector = aiohttp.TCPConnector(resolver=PinnedResolver(pinned),
                                                 use_dns_cache=False, force_close=True)
                async with aiohttp.ClientSession(
                        connector=connector, trust_env=False,
                        timeout=aiohttp.ClientTimeout(total=None)) as session, \
                        session.request(method, checked, headers=headers, json=body,
                                        allow_redirects=False) as response:
                    status = response.status
                    if 300 <= status < 400:
                        raise PeerError("peer-redirect",
                                        f"{checked} answered {status} redirecting to "
                                        f"{response.headers.get('Location', '?')[:200]!r}; "
                                        "redirects are not followed",
                                        hint="configure the peer's final base_url")
                    content = await self._read(response, checked)
                    return PeerResponse(status, content, response.content_type or "")
        except TimeoutError:
            outcome = "peer-timeout"
            raise PeerError("peer-timeout", f"{checked} did not answer within "
                                            f"{self.policy.request_timeout_s:g} s",
                            hint="raise modules.a2a.request_timeout_secs for a slow peer") \
                from None
        except PeerError as error:
            outcome = error.reason
            raise
        except (aiohttp.ClientError, OSError) as error:
            outcome = "peer-unreachable"
            raise PeerError("peer-unreachable", f"{checked} cannot be reached: "
                                                f"{type(error).__name__}: {error}") from None
        finally:
            await self._evidence({"peer": peer, "operation": operation, "method": method,
                                  "url": str(checked), "status": status, "outcome": outcome})

    async def _read(self, response: aiohttp.ClientResponse, url: URL) -> bytes:
        limit = self.policy.max_response_bytes
        too_large = PeerError("peer-too-large", f"{url} answered more than {limit} bytes",
                              hint="raise modules.a2a.max_response_bytes if the peer is right")
        if response.content_length is not None and response.content_length > limit:
            raise too_large
        chunks, size = [], 0
        async for chunk in response.content.iter_chunked(64 * 1024):
            size += len(chunk)
            if size > limit:
                raise too_large
            chunks.append(chunk)
        return b"".join(chunks)

    async def get_json(self, url: str | URL, *, peer: str, operation: str,
                       token: str | None) -> tuple[int, Any]:
        """GET a JSON document: (status, document); document None unless 200 and JSON."""
        response = await self.request("GET", url, peer=peer, operation=operation, token=token)
        if response.status != 200:
            return response.status, None
        try:
            return 200, json.loads(response.body)
        except ValueError:
            return 200, None

    async def rpc(self, url: str, method: str, params: dict[str, Any], *, peer: str,
                  token: str | None) -> Any:
        """A JSON-RPC call; its ``result``, or PeerRpcError / PeerError."""
        request_id = next(self._ids)
        response = await self.request(
            "POST", url, peer=peer, operation=method, token=token,
            body={"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        if response.status in {401, 403}:
            raise PeerError("peer-unauthorized",
                            f"{url} refused the token (HTTP {response.status})",
                            hint=f"check the token of peer {peer!r} in modules.a2a.peers")
        if response.status == 404:
            raise PeerError("peer-not-found", f"{url} has no such agent (HTTP 404)",
                            hint="the peer no longer publishes this agent")
        if response.status == 429:
            raise PeerError("peer-rate-limited", f"{url} rate-limited this node (HTTP 429)")
        try:
            document = json.loads(response.body)
        except ValueError:
            document = None
        if isinstance(document, dict) and "error" in document and "result" not in document:
            raise PeerRpcError(_rpc_failure(document["error"]), url)
        if response.status != 200:
            raise PeerError("peer-http-status", f"{url} answered HTTP {response.status}")
        if not isinstance(document, dict) or document.get("jsonrpc") != "2.0" \
                or document.get("id") != request_id or "result" not in document:
            raise PeerError("peer-bad-answer", f"{url} did not answer with the JSON-RPC 2.0 "
                                               f"response to request {request_id}")
        return document["result"]

    async def _evidence(self, data: dict[str, Any]) -> None:
        if self._record is None:
            return
        try:
            await self._record(PEER_CALL, data)
        except Exception:
            log.exception("event=a2a-peer-call-unrecorded")
