"""``modules.a2a``: direct peers (outbound) and publishing (inbound); both off until configured.

The local endpoint itself needs no configuration, and ``anet init`` writes no block. Validation
messages never repeat a peer's ``token`` (see docs/publishing.md and docs/a2a.md).
"""

from __future__ import annotations

import re
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, SecretStr, field_validator

from anet_a2a import NAME

ENV_REFERENCE = re.compile(r"\A\$\{([A-Za-z_][A-Za-z0-9_]*)\}\Z")
MAX_RESPONSE_CAP = 96 * 1024 * 1024


def _name(value: str, what: str) -> str:
    if not NAME.match(value):
        raise ValueError(f"{what} {value[:80]!r} must be 1-64 characters of A-Z, a-z, 0-9, _ "
                         "and -, starting with a letter or digit")
    return value


class PeerConfig(BaseModel):
    """One A2A deployment this node talks to directly, without a hub."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(description="the peer's name here; its agents are <agent>@<name>")
    base_url: str = Field(description="http(s)://host[:port] of the deployment")
    token: SecretStr = Field(default=SecretStr(""),
                             description='"${VAR}" (read from the environment at each call), a '
                                         'literal token, or "" for no Authorization header')
    tags: list[str] = Field(default_factory=list, description="words to select peers by")

    @field_validator("name")
    @classmethod
    def _valid_name(cls, value: str) -> str:
        return _name(value, "peer name")

    @field_validator("base_url")
    @classmethod
    def _valid_base(cls, value: str) -> str:
        from anet_a2a.peers.guard import check_url  # the one URL rule, shared with every call

        return str(check_url(value.rstrip("/"), what="base_url"))


class AliasServe(StrEnum):
    """Where a published alias's tasks go."""

    BACKEND = "backend"
    """Offered to the modules like a network task (the backends module forwards it)."""
    INBOX = "inbox"
    """Wait in the operator's inbox (``anet inbox``, ``anet reply``)."""


class AliasConfig(BaseModel):
    """One published agent: what serves it and which of its skills the world sees."""

    model_config = ConfigDict(extra="forbid")

    backend: str = Field(default="*", description='the match of a configured backend ("*" or a '
                                                  "skill id) that serves this alias")
    enabled: bool = True
    published: bool = Field(default=False, description="must be true to appear anywhere")
    skills: list[str] = Field(default_factory=list,
                              description="skill ids of the backend to expose; none by default")
    description: str = ""
    serve: AliasServe = AliasServe.BACKEND


class PublishConfig(BaseModel):
    """``modules.a2a.publish``: the listener that publishes aliases; off by default."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = False
    bind: str = Field(default="127.0.0.1", description="address the listener binds")
    port: int = Field(default=43810, ge=0, le=65535, description="0 picks a free port")
    public_base_url: str = Field(default="", description="the URL clients reach, behind a proxy")
    advertise_host: str | None = Field(default=None, description="host on the cards only")
    advertise_port: int | None = Field(default=None, ge=1, le=65535,
                                       description="port on the cards only")
    rate_limit_per_minute: int = Field(default=60, ge=1, description="task requests per token")
    aliases: dict[str, AliasConfig] = Field(default_factory=dict)

    @field_validator("aliases")
    @classmethod
    def _alias_names(cls, aliases: dict[str, AliasConfig]) -> dict[str, AliasConfig]:
        for alias in aliases:
            _name(alias, "alias")
        return aliases

    @field_validator("public_base_url")
    @classmethod
    def _public_base(cls, value: str) -> str:
        value = value.strip().rstrip("/")
        if value and not re.match(r"\Ahttps?://[^/?#@\s]+(/[^?#\s]*)?\Z", value):
            raise ValueError(f"public_base_url {value[:80]!r} must be http(s)://host[:port][/path]")
        return value


class A2AConfig(BaseModel):
    """``modules.a2a``."""

    model_config = ConfigDict(extra="forbid")

    peers: list[PeerConfig] = Field(default_factory=list)
    allow_private_hosts: bool = Field(default=False, description="let peers be on loopback, "
                                      "private and link-local addresses (never cloud metadata)")
    allowed_private_hosts: list[str] = Field(default_factory=list,
                                             description='hosts (or "*.suffix") that may be '
                                                         "private; no other host may")
    max_response_bytes: int = Field(default=1_000_000, ge=1, le=MAX_RESPONSE_CAP)
    request_timeout_secs: float = Field(default=120.0, gt=0, le=3600)
    publish: PublishConfig = Field(default_factory=PublishConfig)

    @field_validator("peers")
    @classmethod
    def _unique_peers(cls, peers: list[PeerConfig]) -> list[PeerConfig]:
        seen: set[str] = set()
        for index, peer in enumerate(peers):
            if peer.name in seen:
                raise ValueError(f"peers[{index}].name {peer.name!r} is used twice; each peer "
                                 "needs its own name")
            seen.add(peer.name)
        return peers

    @field_validator("allowed_private_hosts")
    @classmethod
    def _hosts(cls, hosts: list[str]) -> list[str]:
        cleaned = []
        for host in hosts:
            host = host.strip().lower().rstrip(".")
            if not re.match(r"\A(\*\.)?[a-z0-9._:\[\]-]+\Z", host):
                raise ValueError(f"allowed_private_hosts entry {host[:80]!r} is not a host name, "
                                 'an IP address or "*.suffix"')
            cleaned.append(host.strip("[]"))
        return cleaned
