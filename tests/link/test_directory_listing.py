"""One rendering of a directory entry, for ``anet agents`` and the local A2A endpoint."""

from __future__ import annotations

from anet_core.link import KeyState, PeerInfo, Verification, directory_listing

SELF = "a" * 32
BOB = "b" * 32
EVE = "e" * 32
CARD = {"name": "bob", "description": "answers", "skills": [{"id": "stats"}], "charge": "free",
        "homeHub": "ws://hub"}


def test_a_verified_entry_carries_the_card_and_the_hubs_figures_with_an_iso_timestamp() -> None:
    bob = PeerInfo(aid=BOB, verification=Verification.VERIFIED, key_state=KeyState.FRESH,
                   official=True, card=CARD, home_hub="ws://hub", last_seen=1_700_000_000.25,
                   review_count=2, avg_rating=4.5)
    assert directory_listing([bob], own_aid=SELF) == [{
        "aid": BOB, "verification": "VERIFIED", "keyState": "fresh", "official": True,
        "name": "bob", "description": "answers", "skills": [{"id": "stats"}], "charge": "free",
        "homeHub": "ws://hub", "lastSeen": "2023-11-14T22:13:20Z", "reviewCount": 2,
        "avgRating": 4.5}]


def test_an_unverified_entry_says_nothing_the_agent_said_and_absent_values_are_left_out() -> None:
    eve = PeerInfo(aid=EVE, verification=Verification.UNVERIFIED, key_state=KeyState.STALE,
                   card=CARD, last_seen=1_700_000_000.0)
    bob = PeerInfo(aid=BOB, verification=Verification.VERIFIED, key_state=KeyState.FRESH,
                   card={})
    eve_entry, bob_entry = directory_listing([eve, bob], own_aid=SELF)
    assert eve_entry == {"aid": EVE, "verification": "UNVERIFIED", "keyState": "stale",
                         "official": False}
    assert "lastSeen" not in bob_entry and "avgRating" not in bob_entry
    assert "homeHub" not in bob_entry and bob_entry["reviewCount"] == 0


def test_the_node_itself_is_not_listed() -> None:
    me = PeerInfo(aid=SELF, verification=Verification.VERIFIED, key_state=KeyState.FRESH)
    bob = PeerInfo(aid=BOB, verification=Verification.VERIFIED, key_state=KeyState.FRESH)
    assert [entry["aid"] for entry in directory_listing([me, bob], own_aid=SELF)] == [BOB]
