"""The published cards: the catalog of every published alias, and each alias's own card.

The shape is ZeroClaw's catalog-card model (https://github.com/zeroclaw-labs/zeroclaw, the A2A
discovery page of its book), so a client that reads one reads the other: the catalog's first
interface has ``protocolBinding`` ``catalog`` (the catalog itself), then one JSONRPC interface
per published alias, sorted; its skills are those of every alias with ids ``<alias>/<skill>``
and the alias added to their tags. An alias's card offers JSON-RPC and HTTP+JSON, streaming,
and the bearer scheme its task routes require. Both are signed by the node (A2A §8.4).
"""

from __future__ import annotations

from importlib import metadata
from typing import Any

from anet_a2a.publish.aliases import PublishedAlias
from anet_core.wire import (
    A2A_PROTOCOL_VERSION,
    HTTP_JSON_BINDING,
    JSONRPC_BINDING,
    AgentCapabilities,
    AgentCard,
    AgentInterface,
    AgentSkill,
    SecurityRequirement,
    SecurityScheme,
    StringList,
)

CATALOG_PATH = "/.well-known/agents-card.json"
CATALOG_BINDING = "catalog"
ALIAS_PREFIX = "/a2a"
SECURITY_SCHEME = "bearer"


def anet_version() -> str:
    try:
        return metadata.version("anet")
    except metadata.PackageNotFoundError:
        return "0"


def published_base(public_base_url: str, advertise_host: str | None,
                   advertise_port: int | None, bound_host: str, bound_port: int) -> str:
    """The base URL cards advertise: the public base URL, else the advertise-only host and port
    (each falling back to the listener's own), else the listener's address."""
    if public_base_url:
        return public_base_url.rstrip("/")
    host = advertise_host or bound_host
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"
    return f"http://{host}:{advertise_port or bound_port}"


def alias_url(base: str, alias: str) -> str:
    return f"{base}{ALIAS_PREFIX}/{alias}"


def _skill(skill: dict[str, Any], *, alias: str | None = None) -> AgentSkill:
    tags = [str(tag) for tag in skill.get("tags") or []]
    skill_id = str(skill["id"])
    return AgentSkill(id=f"{alias}/{skill_id}" if alias else skill_id,
                      name=str(skill.get("name") or skill_id),
                      description=str(skill.get("description") or ""),
                      tags=[*tags, alias] if alias else tags)


def alias_card(base: str, alias: PublishedAlias) -> AgentCard:
    url = alias_url(base, alias.name)
    return AgentCard(
        name=alias.name,
        description=alias.config.description or f"anet agent '{alias.name}'.",
        supported_interfaces=[
            AgentInterface(url=url, protocol_binding=JSONRPC_BINDING,
                           protocol_version=A2A_PROTOCOL_VERSION),
            AgentInterface(url=f"{url}/rest", protocol_binding=HTTP_JSON_BINDING,
                           protocol_version=A2A_PROTOCOL_VERSION)],
        version=anet_version(),
        capabilities=AgentCapabilities(streaming=True, push_notifications=False,
                                       extended_agent_card=False),
        security_schemes={SECURITY_SCHEME: SecurityScheme.bearer(
            description="A token from `anet publish token add` on the node that publishes "
                        "this agent")},
        security_requirements=[SecurityRequirement(schemes={SECURITY_SCHEME: StringList()})],
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[_skill(skill) for skill in alias.skills],
    )


def catalog_card(base: str, aliases: list[PublishedAlias]) -> AgentCard:
    ordered = sorted(aliases, key=lambda alias: alias.name)
    return AgentCard(
        name="anet agents",
        description="The catalog of the A2A agents this anet node publishes. It is not an "
                    "agent to send tasks to: each entry below has its own card at "
                    "<url>/.well-known/agent-card.json and takes tasks at its url. The skills "
                    "of every agent are listed here too, each tagged with its agent's alias.",
        supported_interfaces=[
            AgentInterface(url=f"{base}{CATALOG_PATH}", protocol_binding=CATALOG_BINDING,
                           protocol_version=A2A_PROTOCOL_VERSION),
            *(AgentInterface(url=alias_url(base, alias.name), protocol_binding=JSONRPC_BINDING,
                             protocol_version=A2A_PROTOCOL_VERSION) for alias in ordered)],
        version=anet_version(),
        capabilities=AgentCapabilities(streaming=False, push_notifications=False,
                                       extended_agent_card=False),
        default_input_modes=["text/plain"],
        default_output_modes=["text/plain"],
        skills=[_skill(skill, alias=alias.name) for alias in ordered for skill in alias.skills],
    )
