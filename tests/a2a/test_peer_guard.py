"""The outbound client's SSRF rules, each against real HTTP servers on 127.0.0.1: every test
here fails when the rule it names is taken out of anet_a2a/peers/guard.py or client.py."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web
from pydantic import SecretStr

from anet_a2a.peers.client import ClientPolicy, PeerClient, resolve_token
from anet_a2a.peers.guard import HostPolicy, PeerError, check_url
from tests.support.processes import free_port

pytestmark = pytest.mark.timeout(30)


@dataclass
class Server:
    """A loopback HTTP server that records the requests it got."""

    port: int
    hits: list[web.Request] = field(default_factory=list)

    def url(self, host: str = "127.0.0.1", path: str = "/card") -> str:
        return f"http://{host}:{self.port}{path}"


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def ok(request: web.Request) -> web.StreamResponse:
    return web.json_response({"ok": True, "host": request.headers.get("Host"),
                              "authorization": request.headers.get("Authorization")})


@asynccontextmanager
async def server(handler: Handler = ok) -> AsyncIterator[Server]:
    served = Server(free_port())

    async def record(request: web.Request) -> web.StreamResponse:
        served.hits.append(request)
        return await handler(request)

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", record)
    runner = web.AppRunner(app, shutdown_timeout=0.1)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", served.port).start()
    try:
        yield served
    finally:
        await runner.cleanup()


def client(*, allow_private: bool = False, allowed: tuple[str, ...] = (),
           max_bytes: int = 10_000, timeout: float = 5.0,
           names: dict[str, list[str]] | None = None,
           record: list[dict[str, Any]] | None = None) -> tuple[PeerClient, list[str]]:
    """A client whose resolver knows only ``names``; the second value lists what it was asked."""
    asked: list[str] = []

    async def resolver(host: str, port: int) -> list[str]:
        asked.append(host)
        if names is None or host not in names:
            raise OSError(f"no such host {host}")
        return names[host]

    async def recorder(kind: str, data: dict[str, Any]) -> None:
        assert record is not None
        record.append({"kind": kind, **data})

    policy = ClientPolicy(HostPolicy(allow_private, allowed), max_bytes, timeout)
    return PeerClient(policy, resolver=resolver,
                      record=recorder if record is not None else None), asked


async def get(peer_client: PeerClient, url: str, token: str | None = None) -> tuple[int, Any]:
    return await peer_client.get_json(url, peer="p", operation="test", token=token)


async def refused(peer_client: PeerClient, url: str) -> PeerError:
    with pytest.raises(PeerError) as caught:
        await get(peer_client, url)
    return caught.value


async def test_loopback_is_refused_unless_allowed() -> None:
    async with server() as target:
        error = await refused(client()[0], target.url())
        assert error.reason == "peer-host-refused" and "loopback" in error.message
        assert target.hits == []
        status, body = await get(client(allow_private=True)[0], target.url())
        assert status == 200 and body["ok"]


async def test_a_public_name_that_resolves_to_loopback_is_refused() -> None:
    names = {"agents.example.com": ["127.0.0.1"]}
    async with server() as target:
        error = await refused(client(names=names)[0], target.url("agents.example.com"))
        assert error.reason == "peer-host-refused"
        assert "agents.example.com resolves to 127.0.0.1" in error.message
        assert target.hits == []


async def test_every_resolved_address_is_checked() -> None:
    names = {"mixed.example.com": ["93.184.216.34", "127.0.0.1"]}
    async with server() as target:
        error = await refused(client(names=names)[0], target.url("mixed.example.com"))
        assert error.reason == "peer-host-refused" and "127.0.0.1" in error.message
        assert target.hits == []


async def test_the_allow_list_admits_only_the_hosts_it_names() -> None:
    names = {"agents.example.com": ["127.0.0.1"], "other.example.com": ["127.0.0.1"],
             "a.team.internal": ["127.0.0.1"]}
    async with server() as target:
        allowed, _ = client(allowed=("agents.example.com", "*.team.internal"), names=names)
        status, body = await get(allowed, target.url("agents.example.com"))
        assert status == 200 and body["host"] == f"agents.example.com:{target.port}"
        assert (await get(allowed, target.url("a.team.internal")))[0] == 200
        error = await refused(allowed, target.url("other.example.com"))
        assert error.reason == "peer-host-refused"
        assert len(target.hits) == 2


async def test_the_checked_address_is_the_one_connected_to() -> None:
    """The resolver is asked once; the connection goes to what it answered then. A client that
    resolved again at connect time would ask the system for a name only this resolver knows."""
    answers = iter([["127.0.0.1"], ["10.255.255.1"]])
    asked: list[str] = []

    async def rebinding(host: str, port: int) -> list[str]:
        asked.append(host)
        return next(answers)

    policy = ClientPolicy(HostPolicy(False, ("rebind.invalid",)), 10_000, 5.0)
    async with server() as target:
        status, _ = await get(PeerClient(policy, resolver=rebinding), target.url("rebind.invalid"))
        assert status == 200 and asked == ["rebind.invalid"]


async def test_cloud_metadata_is_refused_even_when_private_hosts_are_allowed() -> None:
    peer_client, _ = client(allow_private=True, timeout=2.0,
                            names={"metadata.example.com": ["169.254.169.254"]})
    for url in ("http://169.254.169.254/latest/meta-data",
                "http://metadata.example.com/latest/meta-data"):
        error = await refused(peer_client, url)
        assert error.reason == "peer-host-refused" and "metadata" in error.message


async def test_addresses_embedded_in_ipv6_are_checked_as_ipv4() -> None:
    peer_client, _ = client(timeout=2.0)
    for host in ("[64:ff9b::7f00:1]", "[::ffff:127.0.0.1]", "[::ffff:10.0.0.1]"):
        error = await refused(peer_client, f"http://{host}/card")
        assert error.reason == "peer-host-refused", host


def test_user_information_in_a_url_is_refused() -> None:
    with pytest.raises(PeerError) as caught:
        check_url("http://public.example:80@127.0.0.1/card")
    assert caught.value.reason == "peer-url-invalid"
    for bad in ("ftp://host/x", "http:///x", "http://host/x?q=1", "file:///etc/passwd"):
        with pytest.raises(PeerError):
            check_url(bad)


async def test_redirects_are_not_followed() -> None:
    async with server() as elsewhere:
        async def redirect(request: web.Request) -> web.StreamResponse:
            raise web.HTTPFound(elsewhere.url())

        async with server(redirect) as target:
            error = await refused(client(allow_private=True)[0], target.url())
            assert error.reason == "peer-redirect" and elsewhere.url() in error.message
        assert elsewhere.hits == []


@pytest.mark.parametrize("chunked", [False, True])
async def test_an_oversized_answer_is_cut_off(chunked: bool) -> None:
    async def big(request: web.Request) -> web.StreamResponse:
        if not chunked:
            return web.Response(body=b"x" * 20_000, content_type="application/json")
        response = web.StreamResponse()
        response.enable_chunked_encoding()
        await response.prepare(request)
        for _ in range(20):
            await response.write(b"x" * 1000)
        return response

    async with server(big) as target:
        error = await refused(client(allow_private=True, max_bytes=5_000)[0], target.url())
        assert error.reason == "peer-too-large"


@pytest.mark.parametrize("stage", ["headers", "body"])
async def test_a_slow_answer_times_out(stage: str) -> None:
    release = asyncio.Event()

    async def slow(request: web.Request) -> web.StreamResponse:
        if stage == "headers":
            await release.wait()
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        await response.write(b'{"ok":')
        await release.wait()
        return response

    async with server(slow) as target:
        try:
            error = await refused(client(allow_private=True, timeout=0.5)[0], target.url())
            assert error.reason == "peer-timeout"
        finally:
            release.set()


async def test_a_proxy_in_the_environment_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    async with server() as proxy, server() as target:
        monkeypatch.setenv("HTTP_PROXY", proxy.url(path=""))
        monkeypatch.setenv("http_proxy", proxy.url(path=""))
        status, _ = await get(client(allow_private=True)[0], target.url())
        assert status == 200 and len(target.hits) == 1 and proxy.hits == []


async def test_tokens_and_evidence(monkeypatch: pytest.MonkeyPatch) -> None:
    records: list[dict[str, Any]] = []
    async with server() as target:
        peer_client, _ = client(allow_private=True, record=records)
        monkeypatch.setenv("PEER_TOKEN", "from-env")
        token = resolve_token("p", SecretStr("${PEER_TOKEN}"))
        _, body = await get(peer_client, target.url(), token=token)
        assert body["authorization"] == "Bearer from-env"
        _, body = await get(peer_client, target.url(), token=resolve_token("p", SecretStr("")))
        assert body["authorization"] is None
        monkeypatch.delenv("PEER_TOKEN")
        with pytest.raises(PeerError) as caught:
            resolve_token("p", SecretStr("${PEER_TOKEN}"))
        assert caught.value.reason == "peer-token-unresolved"
        assert "from-env" not in caught.value.message
        await refused(client(record=records)[0], target.url())
    assert [(r["kind"], r["status"], r["outcome"]) for r in records] == [
        ("a2a.peer_call", 200, "ok"), ("a2a.peer_call", 200, "ok"),
        ("a2a.peer_call", None, "peer-host-refused")]
    assert all("from-env" not in str(record) for record in records)
