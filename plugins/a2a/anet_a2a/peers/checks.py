"""``anet doctor``'s check of each direct peer: token resolvable, reachable, card valid; no
task is sent. With the daemon running it asks the daemon to read the peer, else it reads the
peer from this shell. ``anet doctor`` loads it only when peers are configured."""

from __future__ import annotations

import asyncio
import re
from typing import Any

from anet_a2a.config import A2AConfig, PeerConfig
from anet_a2a.peers.client import ClientPolicy, PeerClient, resolve_token
from anet_a2a.peers.discovery import PeerReader
from anet_a2a.peers.guard import PeerError
from anet_a2a.state import MODULE
from anet_core.api import CheckContext, CheckResult, CheckStatus, DoctorCheck


def token_state(peer: PeerConfig) -> str:
    """``none``, ``set`` or ``unresolved: <why>``: never the token."""
    try:
        return "none" if resolve_token(peer.name, peer.token) is None else "set"
    except PeerError as error:
        return f"unresolved: {error.message}"


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
    found: dict[str, Any] = {"baseUrl": peer.base_url, "token": token_state(peer),
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
