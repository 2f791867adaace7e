"""The proxy card (signature, origin extension, hook, cache validators), the list route, the
address and token files, port conflicts, Hermes wiring and the doctor."""

from __future__ import annotations

import base64
import json
import os
import socket
import stat
from pathlib import Path

from a2a.utils._jcs import canonicalize
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from anet_a2a import hermes
from anet_a2a.jws import canonical_card
from anet_a2a.portholder import find_holder
from anet_a2a.state import PORT_RANGE, StateDir
from anet_core import hookimpl
from anet_core.link import SearchQuery, directory_listing
from anet_core.records import CardExtension
from anet_core.settings import Settings
from tests.a2a.local import Local, two_nodes


def unb64u(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


async def test_card_signed_and_cacheable(local: Local, http) -> None:
    async with http.get(local.agent_url() + "/.well-known/agent-card.json",
                        headers=local.headers()) as r:
        assert r.status == 200 and "max-age" in r.headers["Cache-Control"]
        etag, card = r.headers["ETag"], await r.json()
        assert r.headers["Last-Modified"]
    async with http.get(local.agent_url(), headers=local.headers(**{"If-None-Match": etag})) as r:
        assert r.status == 304
    assert card["capabilities"]["streaming"] is True
    assert card["capabilities"]["pushNotifications"] is False
    assert card["securitySchemes"] == {"anetLocal": {"httpAuthSecurityScheme": {
        "scheme": "Bearer", "description": "The token in a2a_token.txt of the local anet node"}}}
    origin = card["capabilities"]["extensions"][0]
    assert origin["uri"] == "urn:anet:a2a:anet-origin/v1"
    assert origin["params"]["aid"] == local.remote.aid
    assert origin["params"]["verification"] == "VERIFIED"
    # The signature verifies over the SDK's own JCS canonical form of the card.
    signature = card["signatures"][0]
    header = json.loads(unb64u(signature["protected"]))
    assert header["alg"] == "EdDSA" and header["kid"].startswith(f"anet:{local.node.aid}#")
    unsigned = {k: v for k, v in card.items() if k != "signatures"}
    assert canonical_card(unsigned) == canonicalize(
        json.loads(canonical_card(unsigned))).encode()
    signing_input = f"{signature['protected']}.".encode() + base64.urlsafe_b64encode(
        canonical_card(unsigned)).rstrip(b"=")
    key = Ed25519PublicKey.from_public_bytes(unb64u(header["jwk"]["x"]))
    key.verify(unb64u(signature["signature"]), signing_input)


def test_jcs_matches_the_sdk_on_awkward_values() -> None:
    value = {"b": [1.5, 1e21, 1e-7, 0.1, -0.0, 100.0], "a": "é\u2028\n\"", "\U0001f600": 1,
             "\ue000": 2, "empty": "", "nested": {"x": []}}
    cleaned = {k: v for k, v in value.items() if k not in {"empty", "nested"}}
    assert canonical_card(value) == canonicalize(cleaned).encode()


async def test_module_extensions_are_declared_on_the_proxy_card(tmp_path: Path,
                                                                  http) -> None:
    class Payments:
        @hookimpl
        def anet_card_extensions(self, node, peer):
            return [CardExtension(module="x402", uri="https://github.com/google-a2a/a2a-x402/v0.1",
                                  params={"payee": peer.aid})]

    async with two_nodes(tmp_path) as local:
        local.node.plugins.pm.register(Payments(), name="payments")
        async with http.get(local.agent_url(), headers=local.headers()) as r:
            extensions = (await r.json())["capabilities"]["extensions"]
    assert extensions[-1]["params"] == {"payee": local.remote.aid}


async def test_unverified_peer_gets_a_placeholder(local: Local, http, monkeypatch) -> None:
    from anet_core.link import HubError

    async def unreachable(aid):
        raise HubError("unreachable", "the hub is down")

    monkeypatch.setattr(local.node.hub, "peer", unreachable)
    async with http.get(local.agent_url(), headers=local.headers()) as r:
        card = await r.json()
    params = card["capabilities"]["extensions"][0]["params"]
    assert params["verification"] == "UNVERIFIED" and "card" not in params
    assert card["name"] == f"anet agent {local.remote.aid}"


async def test_list_route(local: Local, http) -> None:
    async with http.get(f"{local.base}/a2a/v1/agents?limit=10", headers=local.headers()) as r:
        agents = (await r.json())["agents"]
    assert [a["aid"] for a in agents] == [local.remote.aid]  # never this node itself
    assert set(agents[0]) >= {"aid", "url", "cardUrl", "verification", "keyState"}
    # The entry `anet agents` shows, plus the URLs of the agent on this endpoint.
    page = await local.node.hub.search(SearchQuery())
    assert [{k: v for k, v in a.items() if k not in ("url", "cardUrl")} for a in agents] == \
        directory_listing(page.peers, own_aid=local.node.aid)
    assert agents[0]["cardUrl"].startswith(agents[0]["url"])
    async with http.get(f"{local.base}/a2a/v1/agents?limit=0", headers=local.headers()) as r:
        assert r.status == 400


async def test_address_kept_and_conflict_takes_the_interface_down(tmp_path: Path) -> None:
    async with two_nodes(tmp_path) as local:
        address, token = local.address, local.token
        port = int(address.rpartition(":")[2])
        assert port in PORT_RANGE
        assert stat.S_IMODE(local.state.token_file.stat().st_mode) == 0o600
    async with two_nodes(tmp_path) as local:
        assert (local.address, local.token) == (address, token)
        assert local.node.listeners["a2a"].state == "up"
    squatter = socket.socket()
    squatter.bind(("127.0.0.1", port))
    squatter.listen()
    try:
        assert find_holder(port).uid == os.getuid()
        async with two_nodes(tmp_path) as local:
            listener = local.node.listeners["a2a"]
            assert listener.state == "down" and "anet agents wire --refresh" in listener.detail
            assert local.state.conflict_file.exists()
            assert local.token == token  # the holder is this user: the token stays
            assert local.address == address  # never moved
    finally:
        squatter.close()
    async with two_nodes(tmp_path) as local:
        assert not local.state.conflict_file.exists()


async def test_token_replaced_after_emergency_rotation(tmp_path: Path) -> None:
    async with two_nodes(tmp_path) as local:
        token = local.token
        local.node.identity.rotate(emergency=False)
    async with two_nodes(tmp_path) as local:
        assert local.token == token
        local.node.identity.rotate(emergency=True)
    async with two_nodes(tmp_path) as local:
        assert local.token != token


def test_hermes_wire_keeps_comments_and_refreshes(tmp_path: Path) -> None:
    path = tmp_path / "config.yaml"
    path.write_text("# my settings\nmodel: gpt  # keep me\na2a_agents:\n  mine:\n"
                    "    url: http://example.com\n")
    aid = "a" * 32
    hermes.wire(path, aid, aid, hermes.Wiring("127.0.0.1:43811", "t1"), ["echo"])
    text = path.read_text()
    assert "# my settings" in text and "# keep me" in text and "mine:" in text
    assert "http://127.0.0.1:43811/a2a/v1/agents/" + aid in text
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert hermes.refresh(path, hermes.Wiring("127.0.0.1:44000", "t2")) == [aid]
    text = path.read_text()
    assert "44000" in text and "t2" in text and "http://example.com" in text
    assert hermes.config_path("work", {"HOME": "/h"}) == Path(
        "/h/.hermes/profiles/work/config.yaml")
    assert hermes.config_path(None, {"HOME": "/h", "HERMES_HOME": "/x"}) == Path("/x/config.yaml")


def test_cli_rotate_token_and_wire(anet, data_dir: Path, tmp_path: Path) -> None:
    state = StateDir(data_dir / "modules" / "a2a")
    state.record_port(43811)
    state.token().replace()
    old = state.token().current()
    home = tmp_path / "home"
    aid = "b" * 32
    wired = anet("agents", "wire", "hermes", "--a2a", aid, env={"HOME": str(home)}, check=True)
    assert "hermes tools enable a2a" in wired.stdout
    config = home / ".hermes" / "config.yaml"
    assert old in config.read_text()
    anet("a2a", "rotate-token", env={"HOME": str(home)}, check=True)
    assert state.token().current() != old
    assert state.token().current() in config.read_text()


async def test_doctor_reports_conflict(tmp_path: Path) -> None:
    from anet_a2a.doctor import interface_state, token_mode
    from anet_core.doctor import CheckContext
    from anet_core.plugins import make_plugins
    from anet_core.records import CheckStatus

    ctx = CheckContext(Settings(data_dir=tmp_path), make_plugins(load_entry_points=False))
    state = StateDir.of(ctx.paths)
    state.record_conflict("port 43811 is held by someone; the interface is down\n")
    result = await interface_state(ctx)
    assert result.status is CheckStatus.FAIL and "anet agents wire --refresh" in result.hint
    state.token().replace()
    assert (await token_mode(ctx)).status is CheckStatus.OK
    os.chmod(state.token_file, 0o644)
    assert (await token_mode(ctx)).status is CheckStatus.FAIL
