"""Direct peers on the control plane (``/a2a/peers``, which ``anet agents peers`` reads:
``peers/commands.py``; ``anet doctor``'s check of each peer is in ``peers/checks.py``).

Nothing here shows a token: a peer is described by its name, base URL, tags and what its last
reading found.
"""

from __future__ import annotations

from typing import Any

from aiohttp import web

from anet_a2a.peers.checks import token_state
from anet_a2a.peers.service import DIRECT_PEERS, DirectPeers, PeerState
from anet_core.api import NODE_KEY, AnetError


def describe(peers: DirectPeers, name: str, state: PeerState) -> dict[str, Any]:
    peer = peers.peers[name]
    return {"name": name, "baseUrl": peer.base_url, "tags": list(peer.tags),
            "token": token_state(peer),
            "agents": [{"id": agent.id, "name": str(agent.card.get("name") or agent.agent),
                        "url": agent.rpc_url, "tls": agent.tls,
                        "signature": agent.signature.state.value} for agent in state.agents],
            "error": state.error, "problems": state.problems}


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
