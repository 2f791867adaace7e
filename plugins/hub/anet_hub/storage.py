"""The one storage interface behind a hub: directory, registrations, queues, reviews, official list,
ledger.

Everything a hub remembers goes through :class:`HubStorage`. The embedded implementation is
SQLite (``anet_hub.sqlite``); the shared one is PostgreSQL (``anet_hub.postgres``: several hub
instances of one hub, docs/hub.md "Cluster"). The methods are coroutines for that reason, and
each one is a single transaction: nothing here assumes that the hub process is the only writer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any, Protocol
from urllib.parse import urlsplit

from anet_core.api import ReasonError
from anet_hub.ledger import Ledger


class AgentState(StrEnum):
    PENDING = "pending"
    REGISTERED = "registered"


class StorageError(ReasonError):
    """A write or read failed. ``reason`` is what a node is told: ``hub-storage-full`` when the
    disk or the configured quota is full, ``hub-storage-error`` otherwise."""


@dataclass(frozen=True)
class AgentRecord:
    aid: str
    state: AgentState
    history: list[dict[str, Any]]
    key_seq: int
    card: dict[str, Any] | None
    first_seen: float
    last_seen: float
    review_count: int = 0
    rating_sum: int = 0

    @property
    def avg_rating(self) -> float | None:
        return round(self.rating_sum / self.review_count, 2) if self.review_count else None


@dataclass(frozen=True)
class CardIndex:
    """What search looks at, extracted from a verified card (lower case)."""

    text: str
    skills: frozenset[str] = field(default_factory=frozenset)
    tags: frozenset[str] = field(default_factory=frozenset)


@dataclass(frozen=True)
class SearchFilter:
    skill: str | None = None
    tag: str | None = None
    words: tuple[str, ...] = ()


@dataclass(frozen=True)
class QueuedEnvelope:
    seq: int
    id: str
    sender: str
    recipient: str
    text: str
    """The envelope's JSON exactly as it is forwarded."""
    stored_at: float
    expires_at: float


@dataclass(frozen=True)
class ReviewRecord:
    receipt_key: str
    subject: str
    reviewer: str
    rating: int
    review: dict[str, Any]
    created: float


AGENT_COLUMNS = ("aid, state, history, key_seq, card, first_seen, last_seen, review_count, "
                 "rating_sum")
"""The columns of an agent row, in the order :func:`agent_from_row` reads them."""


def agent_from_row(row: Sequence[Any]) -> AgentRecord:
    return AgentRecord(aid=row[0], state=AgentState(row[1]), history=json.loads(row[2]),
                       key_seq=row[3], card=json.loads(row[4]) if row[4] else None,
                       first_seen=row[5], last_seen=row[6], review_count=row[7],
                       rating_sum=row[8])


def like_pattern(word: str) -> str:
    """``%word%`` for ``LIKE … ESCAPE '\\'``, the word's own wildcards escaped."""
    escaped = word.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return f"%{escaped}%"


def redacted(url: str) -> str:
    """A server's ``url`` without its password, for logs and the doctor."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = f"{parts.username}:***@{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    return parts._replace(netloc=netloc).geturl()


class HubStorage(Protocol):
    ledger: Ledger
    """Credit per AID and the settlements that moved it (anet_hub.ledger)."""

    async def close(self) -> None: ...

    async def ping(self) -> None:
        """Raise :class:`StorageError` unless the storage answers now (readiness)."""

    async def count_queued(self) -> int:
        """Envelopes stored and not yet acknowledged (a metric)."""

    # -- registrations and the directory ------------------------------------------------------

    async def get_agent(self, aid: str) -> AgentRecord | None: ...

    async def save_registration(self, aid: str, history: list[dict[str, Any]], key_seq: int,
                                state: AgentState, now: float) -> AgentRecord:
        """Insert or update an agent's history and lastSeen; ``state`` applies to a new agent
        only (an approved agent stays approved)."""

    async def approve(self, aid: str) -> bool:
        """Move a pending agent to registered; False when there is no such pending agent."""

    async def list_pending(self) -> list[AgentRecord]: ...

    async def touch(self, aid: str, now: float) -> None:
        """Record that the agent was connected at ``now`` (lastSeen)."""

    async def save_card(self, aid: str, card: dict[str, Any], index: CardIndex) -> None: ...

    async def search(self, query: SearchFilter, *, after: str | None,
                     limit: int) -> list[AgentRecord]:
        """Registered agents with a card that match, ordered by AID, AIDs above ``after``."""

    # -- reviews ------------------------------------------------------------------------------

    async def add_review(self, review: ReviewRecord) -> bool:
        """Store the review and count it; False when its receipt was already used."""

    # -- the official list --------------------------------------------------------------------

    async def get_official_list(self) -> dict[str, Any] | None: ...

    async def put_official_list(self, doc: dict[str, Any]) -> None: ...

    # -- federated hubs -----------------------------------------------------------------------

    async def peer_instances(self, aid: str) -> list[str]:
        """The instances the federated hub ``aid`` advertised, as last saved (by any instance
        of this hub)."""

    async def save_peer_instances(self, aid: str, urls: list[str]) -> None: ...

    # -- queued envelopes ---------------------------------------------------------------------

    async def enqueue(self, *, id: str, sender: str, recipient: str, text: str, now: float,
                      ttl: float) -> int:
        """Store an envelope until acknowledged or expired; returns its queue position.

        Storing the same (recipient, id) again is not an error and stores nothing (a sender that
        retries after a lost ``accepted``)."""

    async def pending(self, recipient: str, *, after_seq: int, limit: int,
                      now: float) -> list[QueuedEnvelope]:
        """Unexpired envelopes for ``recipient`` in the order they were stored."""

    async def remove(self, recipient: str, envelope_id: str) -> bool:
        """Forget an acknowledged envelope; False when it was not (or no longer) queued."""

    async def purge_expired(self, now: float) -> int: ...
