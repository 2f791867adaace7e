"""The proxy card: this node's signed statement about a remote agent, pointing at this listener.

What the agent said about itself travels only inside the ``anet-origin/v1`` extension, and only
when the node verified it; a card the node could not verify yields a placeholder made from the
AID, with nothing of the agent's own words in it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from anet_a2a import AGENTS_PATH
from anet_a2a.jws import sign_card
from anet_a2a.peers.discovery import DirectAgent
from anet_core.api import CardExtension, Identity, PeerInfo, Verification, b64u, canonical_json
from anet_core.wire import (
    A2A_PROTOCOL_VERSION,
    AGENT_CARD_WELL_KNOWN_PATH,
    HTTP_JSON_BINDING,
    JSONRPC_BINDING,
    AgentCapabilities,
    AgentCard,
    AgentExtension,
    AgentInterface,
    AgentSkill,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)

ORIGIN_EXTENSION = "urn:anet:a2a:anet-origin/v1"
DIRECT_PEER_EXTENSION = "urn:anet:a2a:direct-peer/v1"
PRICES_EXTENSION = "urn:anet:a2a:anet-prices/v1"
"""On a proxy's extended card: the prices from the agent's extended card (docs/payments.md)."""
PREVIEW_EXTENSION = "urn:anet:a2a:preview/v1"
"""A client that requests this in A2A-Extensions also receives preview artifacts in streams."""
SECURITY_SCHEME = "anetLocal"
CARD_VERSION = "1.0.0"
# A network card needs no skill, an A2A card needs at least one (the TCK checks): a remote agent
# takes any task, so a generic skill says exactly that.
_ANY_TASK = AgentSkill(id="task", name="Task", description="Send this agent a task",
                       tags=["anet"])


@dataclass(frozen=True)
class AgentUrls:
    """The URLs of one remote agent on this listener."""

    base: str

    @classmethod
    def of(cls, port: int, aid: str) -> AgentUrls:
        return cls(f"http://127.0.0.1:{port}{AGENTS_PATH}/{aid}")

    @property
    def jsonrpc(self) -> str:
        return f"{self.base}/jsonrpc"

    @property
    def rest(self) -> str:
        return f"{self.base}/rest"

    @property
    def card(self) -> str:
        return f"{self.base}{AGENT_CARD_WELL_KNOWN_PATH}"


def _skills(card: dict[str, Any]) -> list[AgentSkill]:
    skills = [AgentSkill(id=str(skill["id"]), name=str(skill.get("name") or skill["id"]),
                         description=str(skill.get("description", "")),
                         tags=[str(tag) for tag in skill.get("tags") or []])
              for skill in card.get("skills", []) if isinstance(skill, dict) and skill.get("id")]
    return skills or [_ANY_TASK]


def _origin(peer: PeerInfo) -> AgentExtension:
    params: dict[str, Any] = {"aid": peer.aid, "verification": peer.verification.value,
                              "keyState": peer.key_state.value, "official": peer.official}
    if peer.verification is Verification.VERIFIED and peer.card_bytes is not None:
        params["card"] = b64u(peer.card_bytes)
    return AgentExtension(
        uri=ORIGIN_EXTENSION, params=params,
        description="Where this agent is on the anet network and what this node verified; "
                    "card holds the agent's signed network card (base64url)")


def with_prices(card: AgentCard, extended: dict[str, Any]) -> AgentCard:
    """``card`` (unsigned) declaring the prices of ``extended``, the agent's signed extended
    card, which travels as its canonical JSON bytes (base64url) for anyone to verify."""
    prices = AgentExtension(
        uri=PRICES_EXTENSION,
        params={"prices": extended.get("prices", {}),
                "extendedCard": b64u(canonical_json(extended))},
        description="The agent's prices, from its extended card signed by its key")
    capabilities = card.capabilities.model_copy(
        update={"extensions": [*card.capabilities.extensions, prices]})
    return card.model_copy(update={"capabilities": capabilities})


def proxy_card(peer: PeerInfo, urls: AgentUrls,
               extensions: list[CardExtension]) -> AgentCard:
    """The unsigned proxy card of ``peer``."""
    verified = peer.verification is Verification.VERIFIED and peer.card is not None
    card = peer.card if verified and peer.card is not None else {}
    name = card.get("name") or f"anet agent {peer.aid}"
    description = card.get("description") or (
        f"The agent {peer.aid} of the anet network" if verified else
        f"The agent {peer.aid} of the anet network; this node could not verify its card, "
        "so nothing it says about itself is shown")
    declared = [_origin(peer),
                AgentExtension(uri=PREVIEW_EXTENSION,
                               description="Streams also carry preview artifacts: snapshots "
                                           "of a reply that is still being written")]
    declared += [extension.as_agent_extension() for extension in extensions]
    return _local_card(name, description, urls, declared, _skills(card))


def direct_proxy_card(agent: DirectAgent, urls: AgentUrls) -> AgentCard:
    """The unsigned proxy card of an agent of a direct peer: what the peer's card says, and in
    the ``direct-peer/v1`` extension where it is and what this node checked (TLS, a card
    signature)."""
    card = agent.card
    params: dict[str, Any] = {"peer": agent.peer, "agent": agent.agent,
                              "baseUrl": agent.base_url, "url": agent.rpc_url,
                              "source": agent.source, "tls": agent.tls,
                              "signature": agent.signature.state.value}
    if agent.signature.kid:
        params["signatureKid"] = agent.signature.kid
    extension = AgentExtension(
        uri=DIRECT_PEER_EXTENSION, params=params,
        description="This agent is reached directly, without a hub: at url, over TLS or not "
                    "(tls); signature says whether its card carried a signature that verifies "
                    "(by the key named in it)")
    name = str(card.get("name") or agent.id)
    description = str(card.get("description") or
                      f"The agent {agent.agent} of the direct peer {agent.peer}")
    return _local_card(name, description, urls, [extension], _skills(card))


def _local_card(name: str, description: str, urls: AgentUrls,
                extensions: list[AgentExtension], skills: list[AgentSkill]) -> AgentCard:
    return AgentCard(
        name=name,
        description=description,
        supported_interfaces=[
            AgentInterface(url=urls.jsonrpc, protocol_binding=JSONRPC_BINDING,
                           protocol_version=A2A_PROTOCOL_VERSION),
            AgentInterface(url=urls.rest, protocol_binding=HTTP_JSON_BINDING,
                           protocol_version=A2A_PROTOCOL_VERSION),
        ],
        version=CARD_VERSION,
        capabilities=AgentCapabilities(streaming=True, push_notifications=False,
                                       extended_agent_card=True, extensions=extensions),
        security_schemes={SECURITY_SCHEME: SecurityScheme.bearer(
            description="The token in a2a_token.txt of the local anet node")},
        security_requirements=[SecurityRequirement(schemes={SECURITY_SCHEME: StringList()})],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=skills,
    )


def signed(card: AgentCard, identity: Identity) -> AgentCard:
    """``card`` with this node's JWS signature (replacing any earlier one)."""
    unsigned = card.model_copy(update={"signatures": []})
    return unsigned.model_copy(update={"signatures": [sign_card(unsigned.wire(), identity)]})
