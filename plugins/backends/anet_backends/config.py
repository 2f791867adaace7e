"""``modules.backends`` (also accepted in ``modules.a2a``; docs/backends.md, "Configuration")."""

from __future__ import annotations

from datetime import timedelta
from typing import Literal

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    StrictBool,
    field_validator,
    model_validator,
)

from anet_core.api import BackendTarget, GoDuration


class Backend(BaseModel):
    """One local A2A server and the tasks it serves."""

    model_config = ConfigDict(extra="forbid")

    match: str = Field(description='"*" for every accepted text task, or a skill identifier')
    url: str = Field(description="unix:///path/to/socket, or http(s):// with allow_tcp")
    token_file: str | None = Field(default=None,
                                   description="bearer token presented to the backend")
    expected_user: str | int | None = Field(default=None, description="account of the listener")
    # Strict: "yes" or "false" (a string) is refused, naming the key, never read as true.
    accept_untrusted: StrictBool = False
    toolless: StrictBool = False
    allow_tcp: StrictBool = False
    socket_group: str | None = None
    peer_check: Literal["full", "path-only"] = "full"

    @field_validator("match")
    @classmethod
    def _match_not_empty(cls, value: str) -> str:
        if not value.strip():
            raise ValueError('match is empty: use "*" or a skill identifier')
        return value

    @model_validator(mode="after")
    def _consistent(self) -> Backend:
        scheme = self.url.partition("://")[0].lower()
        if scheme in {"http", "https"} and not self.allow_tcp:
            raise ValueError(f"url {self.url!r} is {scheme}: set allow_tcp: true to accept a "
                             "TCP backend, or serve it on a unix socket")
        if scheme == "unix" and not self.url.startswith("unix:///"):
            raise ValueError(f"url {self.url!r}: a unix URL names an absolute path, "
                             "unix:///path/to/socket")
        if self.accept_untrusted and not self.toolless:
            raise ValueError("accept_untrusted needs toolless: true (the operator's statement "
                             "that the backend cannot run commands, read files or reach the "
                             "network)")
        return self

    def target(self) -> BackendTarget:
        """What the backend's kind is given: the keys that say how to reach and check it."""
        return BackendTarget(match=self.match, url=self.url, token_file=self.token_file,
                             expected_user=self.expected_user, socket_group=self.socket_group,
                             peer_check=self.peer_check, allow_tcp=self.allow_tcp)


class Retry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    max_interval: GoDuration = Field(default=timedelta(minutes=2),
                                     description="longest wait between attempts")
    give_up_after: GoDuration = Field(default=timedelta(minutes=10),
                                      description="retry until this long after the first attempt; "
                                                  "0 tries once")

    @field_validator("max_interval")
    @classmethod
    def _positive_interval(cls, value: timedelta) -> timedelta:
        if value.total_seconds() <= 0:
            raise ValueError("max_interval must be a positive duration such as \"2m\": "
                             "a zero wait would retry in a tight loop")
        return value


class BackendsConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    backends: list[Backend] = Field(default_factory=list)
    retry: Retry = Field(default_factory=Retry)

    @field_validator("backends")
    @classmethod
    def _unique_match(cls, backends: list[Backend]) -> list[Backend]:
        seen: dict[str, int] = {}
        for index, backend in enumerate(backends):
            if backend.match in seen:
                raise ValueError(f"backends[{index}].match {backend.match!r} is already used by "
                                 f"backends[{seen[backend.match]}]: each match may appear once")
            seen[backend.match] = index
        return backends
