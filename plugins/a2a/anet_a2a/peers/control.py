"""Direct peers on the control plane (``/a2a/peers``, which ``anet agents peers`` reads:
``peers/commands.py``) and in ``anet doctor`` (one check per peer: token resolvable, reachable,
card valid; no task sent).

Nothing here shows a token: a peer is described by its name, base URL, tags and what its last
reading found.
"""

from __future__ import annotations

import asyncio
import re
from typing import Any

from aiohttp import web

from anet_a2a.config import A2AConfig, PeerConfig
from anet_a2a.peers.client import ClientPolicy, PeerClient, resolve_token
from anet_a2a.peers.discovery import PeerReader
from anet_a2a.peers.guard import PeerError
from anet_a2a.peers.service import DIRECT_PEERS, DirectPeers, PeerState
from anet_a2a.state import MODULE
from anet_core.api import (
    NODE_KEY,
    AnetError,
    CheckContext,
    CheckResult,
    CheckStatus,
    DoctorCheck,
)


def describe(peers: DirectPeers, name: str, state: PeerState) -> dict[str, Any]:
    peer = peers.peers[name]
    return {"name": name, "baseUrl": peer.base_url, "tags": list(peer.tags),
            "token": _token_state(peer),
            "agents": [{"id": agent.id, "name": str(agent.card.get("name") or agent.agent),
                        "url": agent.rpc_url, "tls": agent.tls,
                        "signature": agent.signature.state.value} for agent in state.agents],
            "error": state.error, "problems": state.problems}


def _token_state(peer: PeerConfig) -> str:
    try:
        return "none" if resolve_token(peer.name, peer.token) is None else "set"
    except PeerError as error:
        return f"unresolved: {error.message}"


def _service(request: web.Request) -> DirectPeers | None:
    return request.config_dict[NODE_KEY].get(DIRECT_PEERS)


async def list_peers(request: web.Request) -> web.Response:
    peers = _service(request)
    listed = [] if peers is None else [describe(peers, name, state)
                                       for name, state in peers.states.items()]
    return web.json_response({"peers": listed})


async def check_peer(request: web.Request) -> web.Response:
    """Read one peer again now (its catalog or card; no task is sent)."""
    peers, name = _service(request), request.match_info["name"]
    if peers is None or name not in peers.peers:
        raise AnetError("a2a-peer-unknown", f"no direct peer is called {name!r}",
                        hint="modules.a2a.peers in config.json names them")
    return web.json_response(describe(peers, name, await peers.read(name)))


def routes() -> list[web.RouteDef]:
    return [web.get("/peers", list_peers), web.post("/peers/{name}/check", check_peer)]


def check_name(peer: str) -> str:
    return "a2a-peer-" + re.sub(r"[^a-z0-9]+", "-", peer.lower()).strip("-")


def _verdict(found: dict[str, Any], where: str) -> CheckResult:
    if found["token"].startswith("unresolved"):
        return CheckResult(CheckStatus.FAIL, found["token"].removeprefix("unresolved: "),
                           hint="export the variable in the daemon's environment")
    if found["error"]:
        return CheckResult(CheckStatus.FAIL, found["error"], detail=where,
                           hint="check base_url, that the peer runs, and "
                                "modules.a2a.allowed_private_hosts for a local peer")
    agents = ", ".join(agent["id"] for agent in found["agents"])
    if not agents:
        return CheckResult(CheckStatus.WARN, f"{found['baseUrl']} publishes no agent this node "
                                             "can use", detail="\n".join(found["problems"]),
                           hint="see the peer's catalog")
    unsigned = [agent["id"] for agent in found["agents"] if agent["signature"] == "invalid"]
    if unsigned or found["problems"]:
        return CheckResult(CheckStatus.WARN, f"agents {agents}; "
                                             f"{len(found['problems'])} entries left out",
                           detail="\n".join(found["problems"] +
                                            [f"{agent}: its card's signature does not verify"
                                             for agent in unsigned]),
                           hint="see the peer's catalog")
    return CheckResult(CheckStatus.OK, f"{found['baseUrl']}: agents {agents} ({where})")


def doctor_checks(config: A2AConfig | None) -> list[DoctorCheck]:
    if config is None:
        return []
    checks = []
    for peer in config.peers:
        async def run(ctx: CheckContext, peer: PeerConfig = peer) -> CheckResult:
            if ctx.daemon_status() is not None:
                found = await asyncio.to_thread(ctx.daemon.post, f"/a2a/peers/{peer.name}/check",
                                                {})
                return _verdict(found, "read by the daemon")
            return _verdict(await _read_here(config, peer), "read from this shell: the daemon "
                            "reads ${VAR} tokens from its own environment")

        checks.append(DoctorCheck(check_name(peer.name), MODULE,
                                  f"the direct peer {peer.name} is reachable, its card valid "
                                  "and its token resolvable (no task is sent)", run,
                                  timeout=config.request_timeout_secs * 3 + 5))
    return checks


async def _read_here(config: A2AConfig, peer: PeerConfig) -> dict[str, Any]:
    found: dict[str, Any] = {"baseUrl": peer.base_url, "token": _token_state(peer),
                             "agents": [], "error": "", "problems": []}
    if found["token"].startswith("unresolved"):
        return found
    try:
        discovery = await PeerReader(PeerClient(ClientPolicy.of(config))).discover(peer)
    except PeerError as error:
        found["error"] = error.message
        return found
    found["agents"] = [{"id": agent.id, "signature": agent.signature.state.value}
                       for agent in discovery.agents]
    found["problems"] = discovery.problems
    return found
