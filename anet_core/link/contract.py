"""What the rest of the node needs from its hub connection: the contract of ``node.hub``.

The hub client (``anet_core.link.client``) implements :class:`HubLink`; the task layer and the
modules use only this contract (imported from ``anet_core.link``), so a federated or brokered
hub can replace it later.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from enum import StrEnum
from typing import TYPE_CHECKING, Any, Protocol

from anet_core.errors import ReasonError

if TYPE_CHECKING:
    from anet_core.identity import VerifiedHistory


class JoinState(StrEnum):
    NOT_JOINED = "not-joined"
    PENDING = "pending"
    REGISTERED = "registered"
    UNREACHABLE = "unreachable"


@dataclass(frozen=True)
class JoinStatus:
    """The node's standing at its home hub, with the one sentence the user is shown."""

    state: JoinState
    hub_url: str | None
    since: float | None
    sentence: str
    hub_urls: tuple[str, ...] = ()
    """Every URL of the hub the node tries, in order: those it was joined with, then the
    instances the hub advertised."""

    def as_dict(self) -> dict[str, Any]:
        return {"state": self.state.value, "hubUrl": self.hub_url, "since": self.since,
                "sentence": self.sentence, "hubUrls": list(self.hub_urls)}


class Verification(StrEnum):
    VERIFIED = "VERIFIED"
    UNVERIFIED = "UNVERIFIED"


class KeyState(StrEnum):
    FRESH = "fresh"
    STALE = "stale"


@dataclass(frozen=True)
class PeerInfo:
    """A remote agent as the directory describes it, after this node checked it.

    ``card`` (the signed network card, parsed) and ``card_bytes`` (exactly as signed) are set
    only when ``verification`` is VERIFIED; nothing the agent said is passed on otherwise.
    ``history`` is the verified key history (set whenever it verified, card or not): envelopes
    and receipts from the agent are checked against it.
    """

    aid: str
    verification: Verification
    key_state: KeyState
    official: bool = False
    card: dict[str, Any] | None = None
    card_bytes: bytes | None = None
    encryption_key: str | None = None
    key_seq: int | None = None
    history: VerifiedHistory | None = None
    last_seen: float | None = None
    review_count: int = 0
    avg_rating: float | None = None
    home_hub: str | None = None


def directory_listing(peers: Iterable[PeerInfo], *, own_aid: str) -> list[dict[str, Any]]:
    """The directory as the node shows it (``anet agents``, ``GET /a2a/v1/agents``): every agent
    but the node itself (it is no remote agent of its own), as JSON.

    Always ``aid``, ``verification``, ``keyState`` and ``official``; the agent's own words
    (``name``, ``description``, ``skills``, ``charge``, ``homeHub``) and the hub's figures
    (``lastSeen`` as ISO 8601 UTC, ``reviewCount``, ``avgRating``) only when its card verified.
    Absent values are left out.
    """
    return [_listed(peer) for peer in peers if peer.aid != own_aid]


def _listed(peer: PeerInfo) -> dict[str, Any]:
    entry: dict[str, Any] = {"aid": peer.aid, "verification": peer.verification.value,
                             "keyState": peer.key_state.value, "official": peer.official}
    if peer.verification is Verification.VERIFIED and peer.card is not None:
        card = peer.card
        last_seen = None if peer.last_seen is None else datetime.fromtimestamp(
            peer.last_seen, UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        entry |= {"name": card.get("name", ""), "description": card.get("description", ""),
                  "skills": card.get("skills", []), "charge": card.get("charge", "free"),
                  "homeHub": peer.home_hub, "lastSeen": last_seen,
                  "reviewCount": peer.review_count, "avgRating": peer.avg_rating}
    return {key: value for key, value in entry.items() if value is not None}


@dataclass(frozen=True)
class SearchPage:
    peers: list[PeerInfo]
    next_cursor: str | None = None


@dataclass(frozen=True)
class SearchQuery:
    skill: str | None = None
    tag: str | None = None
    q: str | None = None
    cursor: str | None = None
    limit: int = 50


UNKNOWN_AGENT_REASONS = frozenset({"unknown-agent", "unknown-recipient"})
"""How the hub says it knows no such agent: ``unknown-agent`` to a lookup, ``unknown-recipient``
to a send."""


class HubError(ReasonError):
    """The hub refused or could not be reached. ``reason`` is a stable kebab-case word."""

    @property
    def unknown_agent(self) -> bool:
        """The hub knows no such agent: asking again will not help."""
        return self.reason in UNKNOWN_AGENT_REASONS


class AckTiming(StrEnum):
    """When the acknowledgement of an envelope the receiver kept goes to the hub (after the
    flush that made what it kept durable); the hub then tells the sender it was taken."""

    AT_ONCE = "at-once"
    """The sender may be waiting for it to send more: a task's next update leaves only once
    the one before it was taken (docs/protocol.md, "Relay and delivery"). Its flush is made at
    once."""
    WITH_NEXT_FLUSH = "with-next-flush"
    """Nothing waits for it but the sender's bookkeeping: it goes once the receiver's next flush
    made it durable, whoever makes that flush (the next task's commit), or after a flush of
    its own ``ACK_HOLD_S`` later (link/delivery.py): one fsync then serves both."""


EnvelopeReceiver = Callable[[dict[str, Any]], Awaitable[AckTiming | None]]
"""Takes a delivered envelope; returns when its acknowledgement may go (None: at once)."""
Flush = Callable[[float], Awaitable[None]]
"""Makes what the receiver kept durable: returns once every commit made before the call is on
disk, waiting up to the given seconds for a flush made anyway to cover it (``Store.flush``)."""


class HubLink(Protocol):
    """The node's connection to its home hub."""

    @property
    def status(self) -> JoinStatus: ...

    async def send(self, envelope: dict[str, Any] | str) -> None:
        """Hand a sealed envelope to the hub; returns once the hub has stored it. ``envelope``
        is the envelope or its JSON text (the outbox keeps that), which is sent as it is.

        Raises :class:`HubError` when the hub is unreachable or refuses it (size, rate,
        unknown recipient); the caller keeps the envelope and tries again later.
        """

    def set_receiver(self, receiver: EnvelopeReceiver, *, flush: Flush | None = None) -> None:
        """Deliver every incoming envelope to ``receiver``; when it returns without raising,
        and then ``flush`` made everything the receiver kept durable (at once, or with the next
        flush, as the receiver answered: :class:`AckTiming`), the envelope is acknowledged to
        the hub (and removed there), so the receiver must have persisted what it needs by then.
        Until then the hub, or the sender, keeps the envelope."""

    async def peer(self, aid: str) -> PeerInfo:
        """The verified directory entry of ``aid``; raises HubError("unknown-agent") if none."""

    def cached_peer(self, aid: str) -> PeerInfo | None:
        """What :meth:`peer` would answer now without asking the hub, or None."""

    async def search(self, query: SearchQuery) -> SearchPage:
        """Search the directory; every entry is verified as :meth:`peer` does."""

    def forget_peer(self, aid: str | None = None) -> None:
        """Drop what is cached about ``aid`` (everyone when None): the next ``peer`` asks the
        hub again, e.g. after an envelope failed to open with the cached keys."""

    async def refresh_card(self) -> None:
        """Publish the card again if the skills the modules offer changed since the last time."""

    async def reregister(self) -> None:
        """Register again, so the hub takes this node's new key history (after a rotation),
        then republish the card signed with the new key."""

    async def rejoin(self, url: str | None, instances: Sequence[str] = ()) -> JoinStatus:
        """Follow a new home hub (``anet join``): drop the connection, forget what the old hub's
        directory said, and connect to ``url``, or else to one of the hub's other
        ``instances`` (None: not joined). Raises ``ValueError`` naming a URL that is not a
        hub URL."""

    async def post_review(self, review: dict[str, Any]) -> None:
        """Publish a signed review of an agent, with the receipt that entitles it."""


QUERY_REFUSALS = frozenset({"bad-cursor", "bad-query", "bad-frame"})
"""Reasons a hub gives for a search it refuses because of the query itself (a cursor it did not
make, too many words, a value over its limits): the caller's mistake, not the hub's."""


async def search_remote(hub: HubLink, query: SearchQuery, own_aid: str) -> SearchPage:
    """A page of remote agents: the directory without this node's own entry, still
    ``query.limit`` entries long when the directory has that many. The own entry, left out
    after the hub applied the limit, is made up for by asking for what is missing after the
    hub's cursor (the own entry is in one page only, so that is one more request at most)."""
    peers: list[PeerInfo] = []
    cursor = query.cursor
    for _ in range(2):
        page = await hub.search(replace(query, cursor=cursor, limit=query.limit - len(peers)))
        peers += [peer for peer in page.peers if peer.aid != own_aid]
        cursor = page.next_cursor
        if len(peers) >= query.limit or not cursor:
            break
    return SearchPage(peers=peers, next_cursor=cursor)

