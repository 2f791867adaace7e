"""What a direct peer publishes: its catalog of agents, or its one agent card.

A peer is read at ``<base>/.well-known/agents-card.json`` first (a catalog: its first
interface has ``protocolBinding`` ``catalog``, then one JSONRPC interface per agent, each with
its card at ``<interface>/.well-known/agent-card.json``), else at
``<base>/.well-known/agent-card.json`` (a single agent). Every URL a card names must have the
origin of the configured ``base_url``: the token is sent to that origin and no other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import unquote

from yarl import URL

from anet_a2a import NAME
from anet_a2a.config import PeerConfig
from anet_a2a.jws import CardSignatureCheck, verify_card
from anet_a2a.peers.client import PeerClient, resolve_token
from anet_a2a.peers.guard import PeerError, check_url, origin
from anet_core.wire import AGENT_CARD_WELL_KNOWN_PATH

CATALOG_PATH = "/.well-known/agents-card.json"
CATALOG_BINDING = "catalog"
DIRECT_SEPARATOR = "@"


@dataclass(frozen=True)
class DirectAgent:
    """One agent of a direct peer, as this node reaches it."""

    peer: str
    agent: str
    base_url: str
    rpc_url: str
    card: dict[str, Any]
    """The agent's card as the peer served it (or the catalog's entry when it has no card)."""
    signature: CardSignatureCheck
    source: str
    """``catalog`` or ``card``: how the agent was found."""

    @property
    def id(self) -> str:
        """The agent's path segment on the local endpoint: ``<agent>@<peer>``."""
        return f"{self.agent}{DIRECT_SEPARATOR}{self.peer}"

    @property
    def tls(self) -> bool:
        return self.rpc_url.startswith("https://")


@dataclass
class Discovery:
    """The agents a peer showed, and what was wrong with entries left out."""

    agents: list[DirectAgent] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def is_direct_id(text: str) -> bool:
    agent, sep, peer = text.partition(DIRECT_SEPARATOR)
    return bool(sep) and bool(NAME.match(agent)) and bool(NAME.match(peer))


def _slug(name: str) -> str:
    slug = re.sub(r"[^A-Za-z0-9_-]+", "-", name).strip("-_").lower()[:64]
    return slug if slug and NAME.match(slug) else "agent"


def _major_1(version: Any) -> bool:
    return isinstance(version, str) and (version == "1" or version.startswith("1."))


def _jsonrpc_interfaces(card: dict[str, Any]) -> list[str]:
    return [str(item.get("url", "")) for item in card.get("supportedInterfaces") or []
            if isinstance(item, dict)
            and str(item.get("protocolBinding", "")).lower() == "jsonrpc"
            and _major_1(item.get("protocolVersion"))]


def _is_catalog(document: Any) -> bool:
    return isinstance(document, dict) and any(
        isinstance(item, dict) and str(item.get("protocolBinding", "")).lower() == CATALOG_BINDING
        for item in document.get("supportedInterfaces") or [])


def _same_origin(base: URL, url: str, what: str) -> URL:
    checked = check_url(url, what=what)
    if origin(checked) != origin(base):
        raise PeerError("peer-origin-mismatch",
                        f"{what} {url[:160]!r} is not on the configured origin {base}; it is "
                        "refused, so the peer's token goes nowhere else")
    return checked


def _join(base: str, path: str) -> str:
    return base.rstrip("/") + path


class PeerReader:
    """Reads one configured peer with the node's outbound client."""

    def __init__(self, client: PeerClient) -> None:
        self.client = client

    async def discover(self, peer: PeerConfig) -> Discovery:
        token = resolve_token(peer.name, peer.token)
        base = URL(peer.base_url)
        status, catalog = await self.client.get_json(
            _join(peer.base_url, CATALOG_PATH), peer=peer.name, operation="catalog", token=token)
        if status == 200 and _is_catalog(catalog):
            return await self._from_catalog(peer, base, catalog, token)
        status, card = await self.client.get_json(
            _join(peer.base_url, AGENT_CARD_WELL_KNOWN_PATH), peer=peer.name,
            operation="agent-card", token=token)
        if status != 200 or not isinstance(card, dict):
            raise PeerError("peer-no-card",
                            f"{peer.base_url} serves neither a catalog at {CATALOG_PATH} nor an "
                            f"agent card at {AGENT_CARD_WELL_KNOWN_PATH} (HTTP {status})")
        interfaces = _jsonrpc_interfaces(card)
        if not interfaces:
            raise PeerError("peer-no-card", f"the agent card of {peer.base_url} offers no "
                                            "JSONRPC interface of A2A 1.x")
        rpc = _same_origin(base, interfaces[0], "the card's JSONRPC interface")
        return Discovery(agents=[DirectAgent(
            peer=peer.name, agent=_slug(str(card.get("name", ""))), base_url=peer.base_url,
            rpc_url=str(rpc), card=card, signature=verify_card(card), source="card")])

    async def _from_catalog(self, peer: PeerConfig, base: URL, catalog: dict[str, Any],
                            token: str | None) -> Discovery:
        found = Discovery()
        for url in _jsonrpc_interfaces(catalog):
            try:
                interface = _same_origin(base, url, "a catalog interface")
                alias = unquote(interface.path.rstrip("/").rpartition("/")[2])
                if not NAME.match(alias):
                    raise PeerError("peer-bad-answer", f"the catalog interface {url[:160]!r} "
                                                       "does not end in an agent name")
                found.agents.append(await self._catalog_agent(peer, base, catalog, alias,
                                                              str(interface), token))
            except PeerError as error:
                found.problems.append(error.message)
        return found

    async def _catalog_agent(self, peer: PeerConfig, base: URL, catalog: dict[str, Any],
                             alias: str, interface: str, token: str | None) -> DirectAgent:
        status, card = await self.client.get_json(
            _join(interface, AGENT_CARD_WELL_KNOWN_PATH), peer=peer.name,
            operation="agent-card", token=token)
        if status == 200 and isinstance(card, dict):
            interfaces = _jsonrpc_interfaces(card)
            rpc = _same_origin(base, interfaces[0], "the card's JSONRPC interface") \
                if interfaces else URL(interface)
            return DirectAgent(peer=peer.name, agent=alias, base_url=peer.base_url,
                               rpc_url=str(rpc), card=card, signature=verify_card(card),
                               source="catalog")
        # No card of its own: what the catalog says of the agent (its prefixed skills).
        prefix = f"{alias}/"
        skills = [{**skill, "id": skill["id"][len(prefix):],
                   "tags": [tag for tag in skill.get("tags", []) if tag != alias]}
                  for skill in catalog.get("skills") or []
                  if isinstance(skill, dict) and str(skill.get("id", "")).startswith(prefix)]
        return DirectAgent(peer=peer.name, agent=alias, base_url=peer.base_url,
                           rpc_url=interface, card={"name": alias, "skills": skills},
                           signature=verify_card({}), source="catalog")
