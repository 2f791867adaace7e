"""The hub's directory: registrations, cards, reviews, search and the official list.

Everything an agent asks the directory to keep is verified here first, against the key history
the hub holds for it; what is stored is exactly what was signed, so a node can verify it again.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from anet_core.api import (
    HistoryError,
    VerifiedHistory,
    b64u,
    canonical_json,
    decode_cursor,
    encode_cursor,
    is_aid,
    verify_history,
    verify_signature,
)
from anet_core.protocol.documents import (
    MAX_CARD_BYTES,
    DirectoryDocError,
    NetworkCard,
    receipt_key,
    verify_card,
    verify_review,
)
from anet_core.protocol.frames import (
    CHALLENGE_TTL_S,
    REGISTER_CONTEXT,
    DirectoryEntry,
    Refusal,
    RegisterFrame,
    SearchFrame,
    registration_bytes,
)
from anet_hub.storage import (
    AgentRecord,
    AgentState,
    CardIndex,
    HubStorage,
    ReviewRecord,
    SearchFilter,
)

MAX_QUERY_WORDS = 8
_DEFAULT_PORTS = {"http": 80, "ws": 80, "https": 443, "wss": 443}


def authority(scheme: str, netloc: str) -> str:
    """``host:port`` in lower case with the scheme's default port filled in."""
    parsed = urlsplit(f"{scheme}://{netloc}")
    port = parsed.port or _DEFAULT_PORTS.get(scheme.lower(), 0)
    return f"{(parsed.hostname or '').lower()}:{port}"


@dataclass(frozen=True)
class Challenge:
    """What this connection asked the node to sign."""

    hub_aid: str
    nonce: str
    ts: int
    authorities: frozenset[str]
    """``host:port`` forms under which the node may have reached this hub (the request's Host
    header, and the operator's ``--public-url``)."""


def _refuse_history(error: HistoryError) -> Refusal:
    return Refusal(f"history-{error.reason}", f"the key history is refused: {error}")


def check_challenge(frame: RegisterFrame, challenge: Challenge) -> None:
    """The answer is to this connection's challenge, in time, for this hub's address."""
    if frame.nonce != challenge.nonce or frame.ts != challenge.ts:
        raise Refusal("challenge-mismatch", "the registration answers another challenge than "
                                            "the one this connection was sent")
    if time.time() - challenge.ts > CHALLENGE_TTL_S:
        raise Refusal("challenge-expired", f"the challenge was answered after more than "
                                           f"{CHALLENGE_TTL_S:g} s; connect again")
    parsed = urlsplit(frame.hub_url)
    if authority(parsed.scheme, parsed.netloc) not in challenge.authorities:
        raise Refusal("wrong-hub-url", f"the registration is signed for {frame.hub_url!r}, "
                                       "which is not this hub's address")


def check_answer(frame: RegisterFrame, challenge: Challenge,
                 known: VerifiedHistory | None) -> VerifiedHistory:
    """The answer's key history (continuing ``known``) and its signature by the current key."""
    try:
        history = verify_history(frame.history, expected_aid=frame.aid, known=known)
    except HistoryError as error:
        raise _refuse_history(error) from None
    signed = registration_bytes(hub_aid=challenge.hub_aid, hub_url=frame.hub_url,
                                nonce=frame.nonce, ts=frame.ts, aid=frame.aid,
                                key_seq=history.key_seq)
    if not verify_signature(b64u(history.signing_key), signed, frame.signature,
                            context=REGISTER_CONTEXT):
        raise Refusal("bad-signature", f"the challenge signature does not verify with the "
                                       f"current key (seq {history.key_seq}) of {frame.aid}")
    return history


class Directory:
    def __init__(self, storage: HubStorage, *, approval: bool,
                 online: Callable[[list[str]], Awaitable[set[str]]],
                 federated: Callable[[str], Awaitable[DirectoryEntry]] | None = None) -> None:
        self.storage = storage
        self.approval = approval
        self._online = online
        self._federated = federated
        """Looks an agent up at its home hub when it is not homed here (federation)."""

    async def history_of(self, aid: str) -> VerifiedHistory | None:
        record = await self.storage.get_agent(aid)
        return None if record is None else verify_history(record.history, expected_aid=aid)

    async def register(self, frame: RegisterFrame, challenge: Challenge) -> AgentRecord:
        """Check a node's answer to ``challenge``; store its history. Raises :class:`Refusal`."""
        check_challenge(frame, challenge)
        stored = await self.storage.get_agent(frame.aid)
        try:
            known = (verify_history(stored.history, expected_aid=frame.aid)
                     if stored is not None else None)
        except HistoryError as error:
            raise _refuse_history(error) from None
        history = check_answer(frame, challenge, known)
        state = AgentState.PENDING if self.approval else AgentState.REGISTERED
        return await self.storage.save_registration(frame.aid, history.to_list(), history.key_seq,
                                                    state, time.time())

    async def publish_card(self, aid: str, card: dict[str, Any]) -> NetworkCard:
        if len(canonical_json(card)) > MAX_CARD_BYTES:
            raise Refusal("card-too-large", f"a card is at most {MAX_CARD_BYTES} bytes")
        record = await self.storage.get_agent(aid)
        if record is None:
            raise Refusal("not-registered", "register before publishing a card")
        try:
            content = verify_card(card, verify_history(record.history, expected_aid=aid))
        except DirectoryDocError as error:
            raise Refusal(error.reason, str(error)) from None
        if record.card is not None and record.card.get("publishedAt", 0) > content.publishedAt:
            raise Refusal("card-outdated", "a card published later is already in the directory")
        skills = {word.lower() for skill in content.skills for word in (skill.id, skill.name)
                  if word}
        tags = {tag.lower() for skill in content.skills for tag in skill.tags}
        index = CardIndex(text=f"{content.name}\n{content.description}".lower(),
                          skills=frozenset(skills), tags=frozenset(tags))
        await self.storage.save_card(aid, card, index)
        return content

    async def post_review(self, reviewer_aid: str, review: dict[str, Any]) -> ReviewRecord:
        subject_aid = review.get("subject")
        if not is_aid(subject_aid):
            raise Refusal("review-invalid", "the review's subject is not an AID")
        reviewer, subject = await self.history_of(reviewer_aid), await self.history_of(subject_aid)
        if subject is None:
            raise Refusal("unknown-agent", f"{subject_aid} is not in this hub's directory")
        assert reviewer is not None, "a connected node is always registered"
        try:
            checked, receipt = verify_review(review, reviewer=reviewer, subject=subject)
        except DirectoryDocError as error:
            raise Refusal(error.reason, str(error)) from None
        record = ReviewRecord(receipt_key=receipt_key(receipt), subject=subject_aid,
                              reviewer=reviewer_aid, rating=checked.rating, review=review,
                              created=time.time())
        if not await self.storage.add_review(record):
            raise Refusal("review-duplicate", f"a review for task {receipt.taskId} of "
                                              f"{subject_aid} was already posted; one per receipt")
        return record

    async def entries(self, records: list[AgentRecord]) -> list[DirectoryEntry]:
        online = await self._online([record.aid for record in records]) if records else set()
        return [self._entry(record, record.aid in online) for record in records]

    @staticmethod
    def _entry(record: AgentRecord, online: bool) -> DirectoryEntry:
        return DirectoryEntry(aid=record.aid, history=record.history, card=record.card,
                              last_seen=time.time() if online else record.last_seen,
                              online=online, review_count=record.review_count,
                              avg_rating=record.avg_rating)

    async def lookup(self, aid: str, *, here_only: bool = False) -> DirectoryEntry:
        """``aid``'s entry; from its home hub when it is homed at a federated hub, unless
        ``here_only`` (a federated hub asking: one hop, never a loop)."""
        record = await self.storage.get_agent(aid)
        if record is None or record.state is not AgentState.REGISTERED:
            if self._federated is not None and not here_only:
                return await self._federated(aid)
            raise Refusal("unknown-agent", f"{aid} is not in this hub's directory")
        [entry] = await self.entries([record])
        return entry

    async def search(self, query: SearchFrame) -> tuple[list[DirectoryEntry], str | None]:
        words = tuple((query.q or "").lower().split())
        if len(words) > MAX_QUERY_WORDS:
            raise Refusal("bad-query", f"q has {len(words)} words; at most {MAX_QUERY_WORDS}")
        after = search_position(query.cursor) if query.cursor else None
        filter_ = SearchFilter(skill=query.skill.lower() if query.skill else None,
                               tag=query.tag.lower() if query.tag else None, words=words)
        records = await self.storage.search(filter_, after=after, limit=query.limit + 1)
        page = records[:query.limit]
        more = len(records) > query.limit
        return await self.entries(page), (search_cursor(page[-1].aid)
                                                         if more else None)


def search_cursor(after: str) -> str:
    """Opaque to nodes: results are ordered by AID, the cursor names the last one returned."""
    return encode_cursor({"after": after})


def search_position(cursor: str) -> str:
    try:
        after = decode_cursor(cursor)["after"]
    except (ValueError, KeyError):
        raise Refusal("bad-cursor", "the cursor was not made by this hub; start without one") \
            from None
    if not is_aid(after):
        raise Refusal("bad-cursor", "the cursor was not made by this hub; start without one")
    return after
