"""The node's check of what the directory says about other agents, before anything is used.

A hub relays what agents signed; it could drop, replay or alter it. So every entry is verified
here: the key history from genesis (and against the longest history this node has seen of that
AID, so a hub cannot roll an agent back to an older key), the card against the history's current
key, the official list against the hub operator key pinned at first registration.
"""

from __future__ import annotations

import logging
import time

from anet_core.canonical import b64u, canonical_json
from anet_core.hub.documents import (
    DirectoryDocError,
    OfficialList,
    verify_card,
    verify_official_list,
)
from anet_core.hub.frames import DirectoryEntry
from anet_core.identity import HistoryError, VerifiedHistory, verify_history
from anet_core.network import KeyState, PeerInfo, Verification

log = logging.getLogger("anet.hub.peers")

KEY_FRESHNESS_WINDOW_S = 24 * 3600.0
"""A peer's key is ``fresh`` when its hub saw it prove possession of the history's current key
(a registered connection) within this window; ``stale`` otherwise: a rotation may have happened
since that this node cannot know of yet."""


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
        fresh = entry.last_seen is not None and now - entry.last_seen <= self.freshness_s
        common = {"aid": aid, "key_state": KeyState.FRESH if fresh else KeyState.STALE,
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

