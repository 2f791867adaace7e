"""The node's side of the hub: :class:`HubClient` implements ``anet_core.link.contract.HubLink``.

One background task keeps a WebSocket to the home hub: it answers the hub's challenge, registers,
republishes the card, hands delivered envelopes to the receiver (acknowledging each only after the
receiver returned) and reconnects with capped, jittered exponential backoff when the link drops.

Under load (docs/protocol.md, "Relay and delivery" and "Limits"): requests are paced to the
limits the hub announced and, when refused ``rate-limited`` all the same, retried after
``retryAfter`` within a deadline; verified lookups are kept briefly (``peers.PeerCache``); an
envelope the receiver failed on is retried on the same connection with backoff, the later
envelopes of its sender waiting behind it and those of other senders going on.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import random
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit, urlunsplit

import aiohttp
from pydantic import ValidationError

from anet_core.identity import (
    HistoryError,
    Identity,
    VerifiedHistory,
    sign_document,
    verify_history,
)
from anet_core.identity.encoding import decode_b64u
from anet_core.identity.signatures import verify_with_key
from anet_core.link.contract import (
    CardContent,
    EnvelopeReceiver,
    HubError,
    JoinState,
    JoinStatus,
    PeerInfo,
    SearchPage,
    SearchQuery,
)
from anet_core.link.directory import PeerCache, PeerVerifier
from anet_core.protocol.documents import CARD_TYPE, REVIEW_TYPE
from anet_core.protocol.frames import (
    CHALLENGE_CONTEXT,
    HUB_FRAME,
    REGISTER_CONTEXT,
    WS_PATH,
    AcceptedFrame,
    ChallengeFrame,
    DeliverFrame,
    EntryFrame,
    ErrorFrame,
    HubFrame,
    Limits,
    RegisteredFrame,
    ResultsFrame,
    challenge_bytes,
    registration_bytes,
)
from anet_core.util.canonical import b64u
from anet_core.util.fsutil import write_atomic

if TYPE_CHECKING:
    from anet_core.config import NodeSection
    from anet_core.node import Node
    from anet_core.records import SkillSource

log = logging.getLogger("anet.hub.client")

BACKOFF_BASE_S = 0.5
BACKOFF_CAP_S = 60.0
REQUEST_TIMEOUT_S = 30.0
HANDSHAKE_TIMEOUT_S = 15.0
FIRST_ATTEMPT_WAIT_S = 2.0
"""``open_hub_link`` waits this long for the first connection attempt, so the status shown
right after ``anet up`` is the real one rather than a guess."""
CARD_REFRESH_S = 300.0
"""How often the card is compared with what the modules offer, and republished if it changed."""
SKILL_SOURCE_TIMEOUT_S = 10.0
HEARTBEAT_S = 30.0
MAX_FRAME_BYTES = 64 * 1024 * 1024
PIN_FILE = "hub-pin.json"
"""In the data directory: the hub's AID and key history as first seen at ``hub.url``."""
RATE_LIMIT_DEADLINE_S = 30.0
"""A request refused ``rate-limited`` is retried until this long after it was first made; then
it fails with ``HubError("rate-limited")``."""
RETRY_AFTER_MIN_S = 0.02
RETRY_AFTER_MAX_S = 5.0
"""``retryAfter`` as told by the hub is kept within these bounds (a hub cannot park a request
for long, nor make it spin)."""
RECEIVE_RETRY_BASE_S = 0.5
RECEIVE_RETRY_CAP_S = 30.0
"""An envelope the receiver failed on is tried again after 0.5 s, doubling to 30 s."""


def normalize_hub_url(url: str) -> str:
    """The hub's base URL as ``ws://host:port`` or ``wss://host:port[/prefix]``.

    ``http(s)://`` is accepted for the same hub; a trailing ``/v1/ws`` is dropped.
    """
    parts = urlsplit(url.strip())
    scheme = {"http": "ws", "https": "wss", "ws": "ws", "wss": "wss"}.get(parts.scheme.lower())
    if scheme is None or not parts.hostname:
        raise ValueError(f"{url!r} is not a hub URL: use ws://HOST:PORT or wss://HOST, "
                         "e.g. ws://127.0.0.1:8765")
    path = parts.path.rstrip("/")
    path = path.removesuffix(WS_PATH)
    return urlunsplit((scheme, parts.netloc.lower(), path, "", ""))


def sentence(state: JoinState, url: str | None, since: float | None) -> str:
    """The one sentence a user is shown for each join state."""
    if state is JoinState.NOT_JOINED:
        return "Not joined to a hub: run `anet join <hub-url>`."
    if state is JoinState.PENDING:
        return f"Waiting for the hub operator at {url} to approve this node."
    if state is JoinState.REGISTERED:
        return f"Registered at {url}."
    when = datetime.fromtimestamp(since or time.time(), UTC).isoformat(timespec="seconds")
    return f"Hub {url} unreachable since {when}; retrying."


def backoff_delay(attempt: int) -> float:
    """Exponential, capped, with jitter in its upper half (so a hub restart is not met by every
    node at the same instant, and no node retries at once in a tight loop)."""
    ceiling = min(BACKOFF_CAP_S, BACKOFF_BASE_S * 2 ** min(attempt, 20))
    return ceiling / 2 + random.uniform(0, ceiling / 2)


def receive_retry_delay(failures: int) -> float:
    """The wait before the receiver is given an envelope again, after ``failures`` failures."""
    return min(RECEIVE_RETRY_CAP_S, RECEIVE_RETRY_BASE_S * 2 ** min(max(failures - 1, 0), 20))


class RequestPacer:
    """This node's copy of the token bucket the hub keeps for it (the limits told in
    ``registered``), so requests wait here rather than being refused there.

    Reservations may run into debt: each waits its turn, in order, instead of all retrying at
    once. A ``rate-limited`` answer (the hub's bucket is the truth: it outlives connections)
    holds the bucket back by ``retryAfter``. Acknowledgements are not paced: the hub does not
    count them.
    """

    def __init__(self) -> None:
        self.rate: float | None = None
        self.burst = 0.0
        self._tokens = 0.0
        self._stamp = 0.0

    def configure(self, rate: float, burst: float, *, now: float | None = None) -> None:
        """Follow the hub's limits; unchanged limits keep the state (so does a reconnection,
        as the hub's bucket does)."""
        if (rate, float(burst)) == (self.rate, self.burst) or rate <= 0:
            return
        self.rate, self.burst = rate, float(burst)
        self._tokens, self._stamp = float(burst), time.monotonic() if now is None else now

    def reserve(self, now: float | None = None) -> float:
        """Take a token; the seconds to wait before using it (0 when one was there)."""
        if self.rate is None:
            return 0.0
        self._refill(time.monotonic() if now is None else now)
        self._tokens -= 1
        return max(0.0, -self._tokens / self.rate)

    def refund(self) -> None:
        if self.rate is not None:
            self._tokens += 1

    def hold(self, seconds: float, now: float | None = None) -> None:
        """The hub has no token for this node for ``seconds``."""
        if self.rate is None:
            return
        self._refill(time.monotonic() if now is None else now)
        self._tokens = min(self._tokens, 1 - seconds * self.rate)

    def _refill(self, now: float) -> None:
        assert self.rate is not None
        self._tokens = min(self.burst, self._tokens + (now - self._stamp) * self.rate)
        self._stamp = now


@dataclass(eq=False)
class Held:
    """A delivered envelope not acknowledged yet."""

    envelope: dict[str, Any]
    id: str
    sender: str
    failures: int = 0
    due: float = 0.0


class DeliveryQueue:
    """The envelopes one connection delivered and the receiver has not taken yet, and the order
    in which to give them to it.

    In hub order (storage order per recipient), except that an envelope the receiver failed on
    waits for its retry (``receive_retry_delay``), and the later envelopes from the **same
    sender** wait behind it (a cancel must not overtake the message it cancels); envelopes from
    other senders go on. A retry that is due goes before new envelopes. An id already held is
    not taken twice (a hub may deliver an envelope again on one connection).
    """

    def __init__(self) -> None:
        self._fresh: deque[Held] = deque()
        self._failed: dict[str, Held] = {}
        self._ids: set[str] = set()
        self._changed = asyncio.Event()

    def __len__(self) -> int:
        return len(self._fresh) + len(self._failed)

    def add(self, envelope: dict[str, Any]) -> bool:
        envelope_id = envelope.get("id")
        if not isinstance(envelope_id, str):
            log.warning("event=delivery-without-id")
            return False
        if envelope_id in self._ids:
            log.debug("event=delivery-repeated id=%s", envelope_id)
            return False
        sender = envelope.get("from")
        self._ids.add(envelope_id)
        self._fresh.append(Held(envelope, envelope_id, sender if isinstance(sender, str) else ""))
        self._changed.set()
        return True

    def take(self, now: float) -> tuple[Held | None, float | None]:
        """The next envelope to try now, or None and when a retry falls due (None: nothing
        waits)."""
        due = [held for held in self._failed.values() if held.due <= now]
        if due:
            return min(due, key=lambda held: held.due), None
        for held in self._fresh:
            if held.sender not in self._failed:
                self._fresh.remove(held)
                return held, None
        return None, min((held.due for held in self._failed.values()), default=None)

    async def next(self) -> Held:
        while True:
            self._changed.clear()
            held, wake = self.take(time.monotonic())
            if held is not None:
                return held
            timeout = None if wake is None else max(0.0, wake - time.monotonic())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._changed.wait(), timeout)

    def done(self, held: Held) -> None:
        if self._failed.get(held.sender) is held:
            del self._failed[held.sender]
        self._ids.discard(held.id)

    def failed(self, held: Held, now: float) -> float:
        """Keep ``held`` for a retry; the delay until then."""
        held.failures += 1
        delay = receive_retry_delay(held.failures)
        held.due = now + delay
        self._failed[held.sender] = held
        return delay


class Refused(Exception):
    """The hub (or what answers at its URL) refused this node; the link retries later."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(f"{reason}: {message}")
        self.reason = reason


class HubClient:
    """A node's link to its home hub (``anet_core.link.contract.HubLink``)."""

    def __init__(self, identity: Identity, *, url: str | None, pin_path: Path,
                 card: CardContent | None = None,
                 module_skills: Callable[[], Awaitable[list[dict[str, Any]]]] | None = None,
                 ) -> None:
        self._identity = identity
        self._pin_path = pin_path
        self._card = card
        self._module_skills = module_skills
        self._published_skills: list[dict[str, Any]] | None = None
        self._url = normalize_hub_url(url) if url else None
        self._state = JoinState.NOT_JOINED if self._url is None else JoinState.UNREACHABLE
        self._since: float | None = None if self._url is None else time.time()
        self._receiver: EnvelopeReceiver | None = None
        self._receiver_set = asyncio.Event()
        self._verifier = PeerVerifier()
        self._peers = PeerCache(self._verifier)
        self._lookups: dict[str, asyncio.Task[PeerInfo]] = {}
        self._pacer = RequestPacer()
        self._hub_history: VerifiedHistory | None = None
        self._limits: Limits | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._pending: dict[str, asyncio.Future[HubFrame]] = {}
        self._rids = itertools.count(1)
        self._http: aiohttp.ClientSession | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._attempted = asyncio.Event()

    # -- HubLink ------------------------------------------------------------------------------

    @property
    def status(self) -> JoinStatus:
        return JoinStatus(self._state, self._url, self._since,
                          sentence(self._state, self._url, self._since))

    @property
    def url(self) -> str | None:
        return self._url

    def set_receiver(self, receiver: EnvelopeReceiver) -> None:
        self._receiver = receiver
        self._receiver_set.set()

    async def send(self, envelope: dict[str, Any]) -> None:
        self._require(JoinState.REGISTERED)
        frame = {"type": "send", "envelope": envelope}
        limits = self._limits
        if limits is not None:
            size = len(json.dumps(frame, separators=(",", ":"), ensure_ascii=False)) + 32
            if size > limits.max_envelope_bytes:
                raise HubError("envelope-too-large",
                               f"the envelope is {size} bytes; the hub at {self._url} accepts at "
                               f"most {limits.max_envelope_bytes} bytes per envelope")
        answer = await self._request(frame)
        if not isinstance(answer, AcceptedFrame):
            raise HubError("hub-protocol", f"the hub answered {answer.type} to send")

    async def peer(self, aid: str) -> PeerInfo:
        """The verified entry of ``aid``: from the cache while it holds it (see
        ``peers.PeerCache``), else one lookup shared by every caller asking meanwhile."""
        self._require(JoinState.REGISTERED)
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

    def forget_peer(self, aid: str | None = None) -> None:
        """Drop what is cached of ``aid`` (every AID when None): the next ``peer()`` asks the
        hub. For a receiver whose envelope failed to open with the cached history
        (``unknown-key``, ``bad-signature``): the sender may have rotated its keys."""
        self._peers.forget(aid)
        if aid is None:
            self._lookups.clear()
        else:
            self._lookups.pop(aid, None)

    async def _lookup(self, aid: str, epoch: int) -> PeerInfo:
        answer = await self._request({"type": "lookup", "aid": aid})
        if not isinstance(answer, EntryFrame):
            raise HubError("hub-protocol", f"the hub answered {answer.type} to lookup")
        official = self._verifier.official_members(answer.official_list, self._hub_history)
        info = self._verifier.verify(answer.entry, official)
        self._peers.put(info, epoch=epoch)
        return info

    def _lookup_done(self, aid: str, task: asyncio.Task[PeerInfo]) -> None:
        if self._lookups.get(aid) is task:
            del self._lookups[aid]
        if not task.cancelled():
            task.exception()  # retrieved: every caller that still waits gets it raised

    async def search(self, query: SearchQuery) -> SearchPage:
        self._require(JoinState.REGISTERED)
        answer = await self._request({"type": "search", **{
            key: value for key, value in asdict(query).items() if value is not None}})
        if not isinstance(answer, ResultsFrame):
            raise HubError("hub-protocol", f"the hub answered {answer.type} to search")
        official = self._verifier.official_members(answer.official_list, self._hub_history)
        return SearchPage([self._verifier.verify(entry, official) for entry in answer.entries],
                          answer.next_cursor)

    async def publish_card(self, card: dict[str, Any]) -> None:
        """Keep ``card`` (name, description, skills, charge) as this node's card and publish it
        now if connected; it is republished, freshly signed, after every (re)connection."""
        self._card = CardContent(name=card.get("name", ""), description=card.get("description", ""),
                                 skills=list(card.get("skills", [])),
                                 charge=card.get("charge", "free"))
        if self._ws is not None and self._state in (JoinState.REGISTERED, JoinState.PENDING):
            await self._publish()

    async def refresh_card(self) -> None:
        if self._card is None or self._state is not JoinState.REGISTERED:
            return  # the card is published at the next registration anyway
        if await self._skills() != self._published_skills:
            await self._publish_logged()

    async def reregister(self) -> None:
        await self.rejoin(self._url)

    async def post_review(self, review: dict[str, Any]) -> None:
        self._require(JoinState.REGISTERED)
        signed = sign_document(self._identity, {"type": REVIEW_TYPE, **review,
                                                "createdAt": int(time.time())})
        await self._request({"type": "review", "review": signed})

    # -- lifecycle ----------------------------------------------------------------------------

    async def start(self) -> None:
        """Connect in the background; wait briefly for the first attempt's outcome."""
        if self._url is None:
            return
        if self._http is None:
            self._http = aiohttp.ClientSession()
        self._attempted.clear()
        self._loop_task = asyncio.create_task(self._run(self._url), name="hub-link")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._attempted.wait(), FIRST_ATTEMPT_WAIT_S)

    async def close(self) -> None:
        await self._stop_loop()
        lookups = list(self._lookups.values())
        self.forget_peer()
        for lookup in lookups:
            lookup.cancel()
        await asyncio.gather(*lookups, return_exceptions=True)
        if self._http is not None:
            await self._http.close()
            self._http = None

    async def rejoin(self, url: str | None) -> JoinStatus:
        """Follow a new ``hub.url`` (``anet join``): drop the link and connect to ``url``."""
        await self._stop_loop()
        self.forget_peer()
        self._url = normalize_hub_url(url) if url else None
        self._set_state(JoinState.NOT_JOINED if self._url is None else JoinState.UNREACHABLE)
        await self.start()
        return self.status

    async def _stop_loop(self) -> None:
        task, self._loop_task = self._loop_task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    # -- the connection -----------------------------------------------------------------------

    async def _run(self, url: str) -> None:
        attempt = 0
        while True:
            try:
                if await self._connect_once(url):
                    attempt = 0
            except Refused as refusal:
                log.warning("event=hub-refused url=%s reason=%s detail=%r", url, refusal.reason,
                            str(refusal))
            except (aiohttp.ClientError, OSError, TimeoutError, ValidationError) as error:
                log.info("event=hub-unreachable url=%s error=%r", url, str(error) or type(error))
            if self._state is not JoinState.UNREACHABLE:
                self._set_state(JoinState.UNREACHABLE)
            self._attempted.set()
            delay = backoff_delay(attempt)
            attempt += 1
            log.debug("event=hub-retry url=%s in=%.1fs", url, delay)
            await asyncio.sleep(delay)

    async def _connect_once(self, url: str) -> bool:
        """One connection, from handshake to close. True when it got as far as registering."""
        assert self._http is not None
        ws_url = url + WS_PATH
        async with self._http.ws_connect(ws_url, heartbeat=HEARTBEAT_S, compress=0,
                                         max_msg_size=MAX_FRAME_BYTES,
                                         timeout=aiohttp.ClientWSTimeout(ws_close=5.0)) as ws:
            challenge = await self._receive(ws, ChallengeFrame)
            self._hub_history = self._check_hub(url, challenge)
            await ws.send_str(json.dumps(self._register_frame(ws_url, challenge)))
            registered = await self._receive(ws, RegisteredFrame)
            self._pin(url, self._hub_history)
            self._limits = registered.limits
            self._pacer.configure(registered.limits.rate_per_second, registered.limits.burst)
            self.forget_peer()  # a new connection: what the directory says is asked afresh
            self._ws = ws
            inbox = DeliveryQueue()
            tasks = {asyncio.create_task(self._deliver_forever(ws, inbox))}
            try:
                await self._on_registered(registered, tasks)
                async for message in ws:
                    if message.type is aiohttp.WSMsgType.TEXT:
                        await self._on_frame(message.data, inbox, tasks)
                    elif message.type is aiohttp.WSMsgType.ERROR:
                        break
                log.info("event=hub-closed url=%s code=%s", url, ws.close_code)
            finally:
                self._ws = None
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)
                for future in self._pending.values():
                    if not future.done():
                        future.set_exception(HubError("hub-unreachable",
                                                      f"the connection to {url} closed"))
                self._pending.clear()
            return True

    async def _receive(self, ws: aiohttp.ClientWebSocketResponse,
                       expected: type[ChallengeFrame | RegisteredFrame]) -> Any:
        message = await ws.receive(timeout=HANDSHAKE_TIMEOUT_S)
        if message.type is not aiohttp.WSMsgType.TEXT:
            raise Refused("hub-closed", f"the hub closed the connection "
                                        f"({ws.close_code}: {message.extra or 'no reason'})")
        frame = HUB_FRAME.validate_json(message.data)
        if isinstance(frame, ErrorFrame):
            raise Refused(frame.reason, frame.message)
        if not isinstance(frame, expected):
            raise Refused("hub-protocol", f"expected {expected.__name__}, got {frame.type}")
        return frame

    def _check_hub(self, url: str, challenge: ChallengeFrame) -> VerifiedHistory:
        """The hub's verified history, the same AID as pinned at first registration, and a
        challenge signed by its current key."""
        pinned = self._read_pin(url)
        try:
            history = verify_history(challenge.hub_history, expected_aid=challenge.hub_aid,
                                     known=pinned)
        except HistoryError as error:
            if error.reason == "wrong-aid":
                raise Refused("hub-identity-changed",
                              f"the hub at {url} presents AID {challenge.hub_aid}, but "
                              f"{pinned.aid if pinned else '?'} was pinned at first "
                              f"registration; if its operator replaced it, run "
                              f"`anet join {url}` again") from None
            raise Refused(f"hub-history-{error.reason}", str(error)) from None
        try:
            signature = decode_b64u(challenge.signature, what="challenge signature", length=64)
        except ValueError as error:
            raise Refused("hub-bad-challenge", str(error)) from None
        signed = challenge_bytes(hub_aid=history.aid, nonce=challenge.nonce, ts=challenge.ts)
        if not verify_with_key(history.signing_key, CHALLENGE_CONTEXT, signed, signature):
            raise Refused("hub-bad-challenge", f"the challenge from {url} is not signed by "
                                               f"the hub's key")
        return history

    def _register_frame(self, ws_url: str, challenge: ChallengeFrame) -> dict[str, Any]:
        signer = self._identity.signer()
        signed = registration_bytes(hub_aid=challenge.hub_aid, hub_url=ws_url,
                                    nonce=challenge.nonce, ts=challenge.ts, aid=signer.aid,
                                    key_seq=signer.key_seq)
        return {"type": "register", "aid": signer.aid, "history": self._identity.history,
                "hubUrl": ws_url, "nonce": challenge.nonce, "ts": challenge.ts,
                "signature": b64u(signer.sign(signed, context=REGISTER_CONTEXT))}

    async def _on_registered(self, frame: RegisteredFrame, tasks: set[asyncio.Task[None]]) -> None:
        state = JoinState.REGISTERED if frame.state == "registered" else JoinState.PENDING
        log.info("event=hub-%s url=%s aid=%s", frame.state, self._url, frame.aid)
        self._set_state(state)
        self._attempted.set()
        if self._card is not None:
            # In a task: the answer to publish arrives through the read loop this caller runs.
            tasks.add(asyncio.create_task(self._publish_logged()))

    async def _on_frame(self, text: str, inbox: DeliveryQueue,
                        tasks: set[asyncio.Task[None]]) -> None:
        try:
            frame = HUB_FRAME.validate_json(text)
        except ValidationError as error:
            log.warning("event=hub-bad-frame error=%r", error.errors()[0]["msg"])
            return
        if isinstance(frame, DeliverFrame):
            inbox.add(frame.envelope)
        elif isinstance(frame, RegisteredFrame):
            await self._on_registered(frame, tasks)
        elif (rid := getattr(frame, "rid", None)) is not None and rid in self._pending:
            future = self._pending[rid]
            if not future.done():
                future.set_result(frame)
        elif isinstance(frame, ErrorFrame):
            log.warning("event=hub-error reason=%s message=%r", frame.reason, frame.message)

    async def _deliver_forever(self, ws: aiohttp.ClientWebSocketResponse,
                               inbox: DeliveryQueue) -> None:
        """One at a time, in the order of ``DeliveryQueue``: the receiver keeps the envelope,
        then the hub forgets it. A failure is retried here, on this connection."""
        while True:
            held = await inbox.next()
            await self._receiver_set.wait()
            assert self._receiver is not None
            try:
                await self._receiver(held.envelope)
            except Exception as error:
                delay = inbox.failed(held, time.monotonic())
                # The retry looks the sender up afresh (its keys may have changed).
                if held.sender:
                    self.forget_peer(held.sender)
                log.warning("event=receive-failed id=%s from=%s attempt=%d retryIn=%.1fs "
                            "error=%r", held.id, held.sender, held.failures, delay, error,
                            exc_info=held.failures == 1)
                continue
            inbox.done(held)
            if held.failures:
                log.info("event=receive-recovered id=%s attempts=%d", held.id, held.failures + 1)
            await ws.send_str(json.dumps({"type": "ack", "id": held.id}))

    async def _publish_logged(self) -> None:
        try:
            await self._publish()
        except HubError as error:
            log.warning("event=card-refused reason=%s message=%r", error.reason, error.message)

    async def _skills(self) -> list[dict[str, Any]]:
        """The configured skills, then those the modules offer now (a configured id wins)."""
        assert self._card is not None
        skills = list(self._card.skills)
        offered = await self._module_skills() if self._module_skills is not None else []
        known = {skill.get("id") for skill in skills}
        return skills + [skill for skill in offered if skill.get("id") not in known]

    async def _publish(self) -> None:
        card = self._card
        assert card is not None and self._url is not None
        skills = await self._skills()
        signed = sign_document(self._identity, {
            "type": CARD_TYPE, "name": card.name, "description": card.description,
            "skills": skills, "charge": card.charge, "homeHub": self._url,
            "publishedAt": int(time.time())})
        await self._request({"type": "publish", "card": signed})
        self._published_skills = skills
        log.info("event=card-published url=%s keySeq=%d", self._url, signed["keySeq"])

    async def _request(self, frame: dict[str, Any]) -> HubFrame:
        """Send a request and return its answer; an ``error`` answer raises HubError. Paced to
        the hub's limits; ``rate-limited`` is retried after ``retryAfter`` until
        ``RATE_LIMIT_DEADLINE_S`` after the first try."""
        budget = RATE_LIMIT_DEADLINE_S
        deadline = time.monotonic() + budget
        while True:
            await self._pace(deadline, budget)
            answer = await self._request_once(frame)
            if not isinstance(answer, ErrorFrame):
                return answer
            if answer.reason != "rate-limited":
                raise HubError(answer.reason, answer.message)
            wait = min(RETRY_AFTER_MAX_S, max(RETRY_AFTER_MIN_S, answer.retry_after or 0.0))
            if time.monotonic() + wait > deadline:
                raise HubError("rate-limited", f"{answer.message} (gave up: the request "
                                               f"would have waited more than {budget:g} s)")
            log.debug("event=rate-limited type=%s retryAfter=%.3f", frame["type"], wait)
            self._pacer.hold(wait)

    async def _pace(self, deadline: float, budget: float) -> None:
        delay = self._pacer.reserve()
        if not delay:
            return
        if time.monotonic() + delay > deadline:
            self._pacer.refund()
            raise HubError("rate-limited", f"this node has more requests waiting than the hub "
                                           f"at {self._url} allows within {budget:g} s "
                                           f"({self._pacer.rate:g} requests/s, burst "
                                           f"{self._pacer.burst:g}); try again later")
        await asyncio.sleep(delay)

    async def _request_once(self, frame: dict[str, Any]) -> HubFrame:
        ws = self._ws
        if ws is None:
            raise HubError("hub-unreachable", self.status.sentence)
        rid = str(next(self._rids))
        future: asyncio.Future[HubFrame] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        try:
            await ws.send_str(json.dumps({**frame, "rid": rid}, ensure_ascii=False))
            answer = await asyncio.wait_for(future, REQUEST_TIMEOUT_S)
        except TimeoutError:
            raise HubError("hub-timeout", f"the hub at {self._url} did not answer within "
                                          f"{REQUEST_TIMEOUT_S:g} s") from None
        except (aiohttp.ClientError, ConnectionError) as error:
            raise HubError("hub-unreachable", f"the connection to {self._url} failed: "
                                              f"{error}") from None
        finally:
            self._pending.pop(rid, None)
        return answer

    def _require(self, state: JoinState) -> None:
        if self._state is not state:
            reason = {JoinState.NOT_JOINED: "not-joined", JoinState.PENDING: "not-approved",
                      JoinState.UNREACHABLE: "hub-unreachable"}.get(self._state, "hub-error")
            raise HubError(reason, self.status.sentence)

    def _set_state(self, state: JoinState) -> None:
        self._state = state
        self._since = None if state is JoinState.NOT_JOINED else time.time()

    # -- the hub pin --------------------------------------------------------------------------

    def _read_pin(self, url: str) -> VerifiedHistory | None:
        try:
            pin = json.loads(self._pin_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            raise Refused("hub-pin-unreadable", f"{self._pin_path}: {error}; delete it and "
                                                "run `anet join` again") from None
        if pin.get("url") != url:
            return None  # pinned for another hub: this one is met for the first time
        try:
            return verify_history(pin["history"], expected_aid=pin["hubAid"])
        except (HistoryError, KeyError, TypeError) as error:
            raise Refused("hub-pin-unreadable", f"{self._pin_path}: {error}; delete it and "
                                                "run `anet join` again") from None

    def _pin(self, url: str, history: VerifiedHistory) -> None:
        pin = {"url": url, "hubAid": history.aid, "history": history.to_list()}
        with contextlib.suppress(FileNotFoundError):
            if json.loads(self._pin_path.read_text(encoding="utf-8")) == pin:
                return
        write_atomic(self._pin_path, (json.dumps(pin, indent=2) + "\n").encode())


def card_from_config(section: NodeSection) -> CardContent:
    """The card this node publishes, from config.json's ``node`` section."""
    return CardContent(name=section.name, description=section.description,
                       skills=[skill.model_dump() for skill in section.skills])


def pin_path(root: Path) -> Path:
    return root / PIN_FILE


@asynccontextmanager
async def open_hub_link(node: Node) -> AsyncIterator[HubClient]:
    """The node's hub link, connected in the background while the context is open."""
    client = HubClient(node.identity, url=node.config.hub.url, pin_path=pin_path(node.paths.root),
                       card=card_from_config(node.config.node),
                       module_skills=partial(module_skills, node))
    await client.start()
    refresher = asyncio.create_task(_refresh_card_forever(client), name="card-refresh")
    try:
        yield client
    finally:
        refresher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await refresher
        await client.close()


async def module_skills(node: Node) -> list[dict[str, Any]]:
    """The skills every module offers for the card (``anet_card_skills``); a source that fails
    or takes longer than ``SKILL_SOURCE_TIMEOUT_S`` is left out of this publication."""
    sources = node.plugins.collect("anet_card_skills", node=node)

    async def read(source: SkillSource) -> list[dict[str, Any]]:
        try:
            return await asyncio.wait_for(source.read(), SKILL_SOURCE_TIMEOUT_S)
        except Exception as error:  # noqa: BLE001 - one module's failure leaves its skills out
            log.warning("event=card-skills-failed module=%s error=%r", source.module, error)
            return []

    return [skill for skills in await asyncio.gather(*map(read, sources)) for skill in skills]


async def _refresh_card_forever(client: HubClient) -> None:
    """Modules' skills can change while the node runs (a backend restarted with a new card);
    a refused publication is logged and tried again at the next round."""
    while True:
        await asyncio.sleep(CARD_REFRESH_S)
        await client.refresh_card()
