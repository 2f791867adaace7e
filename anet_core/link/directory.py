"""The node's check of what the directory says about other agents, before anything is used.

A hub relays what agents signed; it could drop, replay or alter it. So every entry is verified
here: the key history from genesis (and against the longest history this node has seen of that
AID, so a hub cannot roll an agent back to an older key), the card against the history's current
key, the official list against the hub operator key pinned at first registration.

What verified may be kept briefly (:class:`PeerCache`), so that a burst of envelopes from one
peer costs one lookup: only fully verified entries whose key is fresh, and ``keyState`` is worked
out again from ``lastSeen`` at every read, so a kept entry never reads fresher than the hub said.
Lookups of one AID made while one is on its way share it (:class:`Directory`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import asdict, replace
from typing import Any

from anet_core.identity import HistoryError, VerifiedHistory, verify_history
from anet_core.link.contract import (
    HubError,
    KeyState,
    PeerInfo,
    SearchPage,
    SearchQuery,
    Verification,
)
from anet_core.protocol.documents import (
    DirectoryDocError,
    OfficialList,
    verify_card,
    verify_official_list,
)
from anet_core.protocol.frames import DirectoryEntry, EntryFrame, HubFrame, ResultsFrame
from anet_core.util.canonical import b64u, canonical_json

log = logging.getLogger(__name__)

KEY_FRESHNESS_WINDOW_S = 24 * 3600.0
"""A peer's key is ``fresh`` when its hub saw it prove possession of the history's current key
(a registered connection) within this window; ``stale`` otherwise: a rotation may have happened
since that this node cannot know of yet."""
PEER_CACHE_TTL_S = 30.0
"""How long a verified lookup answers ``peer()`` again without asking the hub."""
PEER_CACHE_MAX_ENTRIES = 4096


def key_state_at(last_seen: float | None, now: float, window_s: float) -> KeyState:
    """``fresh`` when the hub saw the agent with its current key within ``window_s`` of ``now``."""
    fresh = last_seen is not None and now - last_seen <= window_s
    return KeyState.FRESH if fresh else KeyState.STALE


class PeerVerifier:
    """Verifies directory entries and remembers, per AID, the longest history verified."""

    def __init__(self, *, freshness_s: float = KEY_FRESHNESS_WINDOW_S) -> None:
        self.freshness_s = freshness_s
        self._known: dict[str, VerifiedHistory] = {}
        self._official: OfficialList | None = None

    def official_members(self, doc: dict[str, object] | None,
                         hub_history: VerifiedHistory | None) -> frozenset[str]:
        """Members of the newest official list verified so far (an older one is not taken
        back: a hub cannot undo an operator's change by serving a previous list)."""
        if doc is not None and hub_history is not None:
            try:
                listed = verify_official_list(doc, hub_history)
            except DirectoryDocError as error:
                log.warning("event=official-list-unverified reason=%s", error.reason)
            else:
                if self._official is None or listed.version >= self._official.version:
                    self._official = listed
        return self.members()

    def members(self) -> frozenset[str]:
        """Members of the newest official list verified so far."""
        return frozenset(self._official.members) if self._official else frozenset()

    def verify(self, entry: DirectoryEntry, official: frozenset[str], *,
               now: float | None = None) -> PeerInfo:
        aid = entry.aid
        try:
            history = verify_history(entry.history, expected_aid=aid, known=self._known.get(aid))
        except HistoryError as error:
            log.warning("event=peer-unverified aid=%s reason=history-%s", aid, error.reason)
            return PeerInfo(aid=aid, verification=Verification.UNVERIFIED,
                            key_state=KeyState.STALE, official=aid in official,
                            last_seen=entry.last_seen)
        self._known[aid] = history
        now = time.time() if now is None else now
        common = {"aid": aid, "key_state": key_state_at(entry.last_seen, now, self.freshness_s),
                  "official": aid in official, "encryption_key": b64u(history.encryption_key),
                  "key_seq": history.key_seq, "history": history, "last_seen": entry.last_seen,
                  "review_count": entry.review_count, "avg_rating": entry.avg_rating}
        if entry.card is None:
            return PeerInfo(verification=Verification.UNVERIFIED, **common)
        try:
            card = verify_card(entry.card, history)
        except DirectoryDocError as error:
            log.warning("event=peer-unverified aid=%s reason=%s", aid, error.reason)
            return PeerInfo(verification=Verification.UNVERIFIED, **common)
        return PeerInfo(verification=Verification.VERIFIED, card=dict(entry.card),
                        card_bytes=canonical_json(entry.card), home_hub=card.homeHub, **common)


class PeerCache:
    """Verified peers by AID for ``ttl_s`` seconds (monotonic clock), at most ``max_entries``.

    Only VERIFIED entries with a fresh key are kept (an unverified or stale one is asked again
    every time: the hub may have the fix or the rotation by then). A read recomputes ``keyState``
    from the entry's ``lastSeen`` and the wall clock now, and drops the entry once that reads
    stale: the cached ``lastSeen`` is never newer than the hub's, so the cache can only err
    towards stale. ``official`` is read from the newest official list verified so far (it
    comes with every lookup and search answer). ``forget`` drops an AID (an envelope from it
    failed, so a key rotation is picked up) or everything (a new connection, another hub);
    ``epoch`` lets a lookup that began before a ``forget`` know not to keep its answer.
    """

    def __init__(self, verifier: PeerVerifier, *, ttl_s: float = PEER_CACHE_TTL_S,
                 max_entries: int = PEER_CACHE_MAX_ENTRIES) -> None:
        self._verifier = verifier
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self.epoch = 0
        self._entries: dict[str, tuple[float, PeerInfo]] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, aid: str, *, now: float | None = None,
            wall: float | None = None) -> PeerInfo | None:
        kept = self._entries.get(aid)
        if kept is None:
            return None
        stored_at, info = kept
        now = time.monotonic() if now is None else now
        state = key_state_at(info.last_seen, time.time() if wall is None else wall,
                             self._verifier.freshness_s)
        if now - stored_at >= self.ttl_s or state is not KeyState.FRESH:
            del self._entries[aid]
            return None
        official = aid in self._verifier.members()
        if info.key_state is state and info.official == official:
            return info  # frozen and unchanged: a copy per envelope cost more than the lookup
        return replace(info, key_state=state, official=official)

    def put(self, info: PeerInfo, *, epoch: int, now: float | None = None) -> None:
        if epoch != self.epoch or info.verification is not Verification.VERIFIED \
                or info.history is None or info.key_state is not KeyState.FRESH:
            return
        self._entries.pop(info.aid, None)
        self._entries[info.aid] = (time.monotonic() if now is None else now, info)
        while len(self._entries) > self.max_entries:
            del self._entries[next(iter(self._entries))]  # the oldest

    def forget(self, aid: str | None = None) -> None:
        self.epoch += 1
        if aid is None:
            self._entries.clear()
        else:
            self._entries.pop(aid, None)


class Directory:
    """The hub's directory as this node reads it: every entry verified (:class:`PeerVerifier`),
    verified lookups kept briefly (:class:`PeerCache`), one lookup per AID at a time.

    ``request`` asks the hub (``HubConnection.request``); ``hub_history`` is the hub's key
    history as verified at the last handshake, which the official list is checked against.
    """

    def __init__(self, request: Callable[[dict[str, Any]], Awaitable[HubFrame]],
                 hub_history: Callable[[], VerifiedHistory | None]) -> None:
        self._request = request
        self._hub_history = hub_history
        self._verifier = PeerVerifier()
        self._peers = PeerCache(self._verifier)
        self._lookups: dict[str, asyncio.Task[PeerInfo]] = {}

    async def peer(self, aid: str) -> PeerInfo:
        """The verified entry of ``aid``: from the cache while it holds it, else one lookup
        shared by every caller asking meanwhile."""
        cached = self._peers.get(aid)
        if cached is not None:
            return cached
        lookup = self._lookups.get(aid)
        if lookup is None:
            lookup = asyncio.create_task(self._lookup(aid, self._peers.epoch),
                                         name=f"hub-lookup-{aid[:8]}")
            self._lookups[aid] = lookup
            lookup.add_done_callback(lambda task: self._lookup_done(aid, task))
        return await asyncio.shield(lookup)

    def cached(self, aid: str) -> PeerInfo | None:
        """The entry :meth:`peer` would answer at once, without asking the hub; None when it
        would have to ask."""
        return self._peers.get(aid)

    async def search(self, query: SearchQuery) -> SearchPage:
        answer = await self._request({"type": "search", **{
            key: value for key, value in asdict(query).items() if value is not None}})
        if not isinstance(answer, ResultsFrame):
            raise HubError("hub-protocol", f"the hub answered {answer.type} to search")
        official = self._verifier.official_members(answer.official_list, self._hub_history())
        return SearchPage([self._verifier.verify(entry, official) for entry in answer.entries],
                          answer.next_cursor)

    def forget(self, aid: str | None = None) -> None:
        """Drop what is kept of ``aid`` (every AID when None): the next :meth:`peer` asks the
        hub, and a lookup already on its way is not shared any more."""
        self._peers.forget(aid)
        if aid is None:
            self._lookups.clear()
        else:
            self._lookups.pop(aid, None)

    async def close(self) -> None:
        lookups = list(self._lookups.values())
        self.forget()
        for lookup in lookups:
            lookup.cancel()
        await asyncio.gather(*lookups, return_exceptions=True)

    async def _lookup(self, aid: str, epoch: int) -> PeerInfo:
        answer = await self._request({"type": "lookup", "aid": aid})
        if not isinstance(answer, EntryFrame):
            raise HubError("hub-protocol", f"the hub answered {answer.type} to lookup")
        official = self._verifier.official_members(answer.official_list, self._hub_history())
        info = self._verifier.verify(answer.entry, official)
        self._peers.put(info, epoch=epoch)
        return info

    def _lookup_done(self, aid: str, task: asyncio.Task[PeerInfo]) -> None:
        if self._lookups.get(aid) is task:
            del self._lookups[aid]
        if not task.cancelled():
            task.exception()  # retrieved: every caller that still waits gets it raised
