"""Who a task handed in locally comes from (see tasks/local.py): stored as the peer
``local:<module>:<principal>``, which is never an AID."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from anet_core.protocol.tasks import METADATA_PREFIX, TaskMetadata

LOCAL_PREFIX = "local:"
ORIGIN = TaskMetadata.ORIGIN


def is_local_peer(peer: str) -> bool:
    """True for the stored peer of a task handed in locally (never an AID)."""
    return peer.startswith(LOCAL_PREFIX)


@dataclass(frozen=True)
class LocalOrigin:
    """Who hands tasks in: the module, the caller it authenticated, and what a backend is to
    know of that caller (``anet.*`` keys, e.g. ``anet.publish_token``)."""

    module: str
    principal: str
    metadata: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if any(not key.startswith(METADATA_PREFIX) for key in self.metadata):
            raise ValueError("origin metadata keys start with 'anet.'")

    @property
    def peer(self) -> str:
        return f"{LOCAL_PREFIX}{self.module}:{self.principal}"
