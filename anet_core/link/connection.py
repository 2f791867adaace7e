"""The WebSocket to the home hub: handshake, hub pin, reconnection and requests.

One background task keeps the connection. It checks the hub's challenge (the hub's key history
against the pin taken at first registration, docs/protocol.md "Hub registration"), registers,
and reconnects with capped, jittered exponential backoff when the link drops. Requests carry
an ``rid`` that the hub repeats in its answer, so answers are matched while ``deliver`` frames
arrive in between. Under load (docs/protocol.md, "Relay and delivery" and "Limits") requests
are paced to the limits the hub announced and, when refused ``rate-limited`` all the same,
retried after ``retryAfter`` within a deadline.

What a registered connection carries besides requests (deliveries, the card) is the business
of the link's other parts: each registered connection is a :class:`Channel` handed to them.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import logging
import time
from collections.abc import Callable, Coroutine, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import aiohttp
from pydantic import ValidationError

from anet_core.config import HUB_HEARTBEAT
from anet_core.identity import HistoryError, Identity, VerifiedHistory, verify_history
from anet_core.identity.encoding import decode_b64u
from anet_core.identity.signatures import verify_with_key
from anet_core.link.contract import HubError, JoinState, JoinStatus
from anet_core.link.pin import Advertised, HubPin
from anet_core.protocol.frames import (
    CHALLENGE_CONTEXT,
    HUB_FRAME,
    WS_PATH,
    ChallengeFrame,
    DeliverFrame,
    ErrorFrame,
    HubFrame,
    InstancesFrame,
    Limits,
    Refusal,
    RegisteredFrame,
    answer_challenge,
    challenge_bytes,
    normalize_hub_url,
)
from anet_core.util.backoff import Backoff, Failover, TokenBucket
from anet_core.util.canonical import compact_json

log = logging.getLogger(__name__)

RECONNECT = Backoff(first_s=0.5, cap_s=60.0, jitter=0.5)
"""After a round of the hub's instances without a registration. Jittered, so a hub restart is
not met by every node at the same instant."""
REQUEST_TIMEOUT_S = 30.0
HANDSHAKE_TIMEOUT_S = 15.0
FIRST_ATTEMPT_WAIT_S = 2.0
"""``start`` waits this long for the first connection attempt, so the status shown right after
``anet up`` is the real one rather than a guess."""
HEARTBEAT_S = HUB_HEARTBEAT.total_seconds()
"""After this long without a frame from the hub, the node pings it (config.json's
``hub.heartbeat``); no answer within half of it ends the connection: a hub that froze is left
within 16 s, and an idle link costs one ping and its pong every 10 s (a ping from the hub
counts as a frame, so one side pings)."""
UNSENT_HEADERS = ("Accept", "Accept-Encoding", "User-Agent")
MAX_FRAME_BYTES = 64 * 1024 * 1024
RATE_LIMIT_DEADLINE_S = 30.0
"""A request refused ``rate-limited`` is retried until this long after it was first made; then
it fails with ``HubError("rate-limited")``."""
RETRY_AFTER_MIN_S = 0.02
RETRY_AFTER_MAX_S = 5.0
"""``retryAfter`` as told by the hub is kept within these bounds (a hub cannot park a request
for long, nor make it spin)."""


def _time_out(future: asyncio.Future[Any]) -> None:
    if not future.done():
        future.set_exception(TimeoutError())


def sentence(state: JoinState, url: str | None, since: float | None, others: int = 0) -> str:
    """The one sentence a user is shown for each join state (``others``: how many more
    instances of the hub the node tries besides ``url``)."""
    if state is JoinState.NOT_JOINED:
        return "Not joined to a hub: run `anet join <hub-url>`."
    if state is JoinState.PENDING:
        return f"Waiting for the hub operator at {url} to approve this node."
    if state is JoinState.REGISTERED:
        return f"Registered at {url}."
    when = datetime.fromtimestamp(since or time.time(), UTC).isoformat(timespec="seconds")
    also = f" (and its {others} other instance{'s' if others > 1 else ''})" if others else ""
    return f"Hub {url}{also} unreachable since {when}; retrying."


class RequestPacer:
    """This node's copy of the token bucket the hub keeps for it (the limits told in
    ``registered``), so requests wait here rather than being refused there.

    Reservations may run into debt: each waits its turn, in order, instead of all retrying at
    once. A ``rate-limited`` answer (the hub's bucket is the truth: it outlives connections)
    holds the bucket back by ``retryAfter``. Acknowledgements are not paced: the hub does not
    count them. Until the hub told its limits, nothing is paced.
    """

    def __init__(self) -> None:
        self.bucket: TokenBucket | None = None

    def configure(self, rate: float, burst: float, *, now: float | None = None) -> None:
        """Follow the hub's limits; unchanged limits keep the state (so does a reconnection,
        as the hub's bucket does). Limits no bucket can have are not followed."""
        bucket = self.bucket
        if bucket is not None and (rate, float(burst)) == (bucket.rate, bucket.burst):
            return
        try:
            self.bucket = TokenBucket(rate, burst, now=time.monotonic() if now is None else now)
        except ValueError as error:
            log.warning("event=hub-limits-ignored error=%r", str(error))

    def reserve(self, now: float | None = None) -> float:
        """Take a token; the seconds to wait before using it (0 when one was there)."""
        if self.bucket is None:
            return 0.0
        return self.bucket.reserve(time.monotonic() if now is None else now)

    def refund(self) -> None:
        if self.bucket is not None:
            self.bucket.refund()

    def hold(self, seconds: float, now: float | None = None) -> None:
        """The hub has no token for this node for ``seconds``."""
        if self.bucket is not None:
            self.bucket.hold(seconds, time.monotonic() if now is None else now)


class Channel:
    """One registered connection: frames sent on it without an answer (acknowledgements), the
    envelopes it delivers (to ``on_deliver``) and the work that lasts as long as it does."""

    def __init__(self, ws: aiohttp.ClientWebSocketResponse) -> None:
        self._ws = ws
        self._work: set[asyncio.Task[None]] = set()
        self.on_deliver: Callable[[dict[str, Any]], object] | None = None

    def spawn(self, work: Coroutine[Any, Any, None], *, name: str) -> None:
        """Run ``work`` until it ends or the connection closes."""
        task = asyncio.create_task(work, name=name)
        self._work.add(task)
        task.add_done_callback(self._work.discard)

    async def send(self, frame: dict[str, Any]) -> None:
        await self._ws.send_str(compact_json(frame))

    async def close(self) -> None:
        work = list(self._work)
        for task in work:
            task.cancel()
        await asyncio.gather(*work, return_exceptions=True)


class HubConnection:
    """The connection to ``url``, kept up in the background between :meth:`start` and
    :meth:`stop`.

    ``on_open`` is called with each new registered connection before any frame after
    ``registered`` is read; ``on_registered`` each time the hub says ``registered`` (at
    registration, and again when an operator approves a pending node).
    """

    def __init__(self, identity: Identity, *, url: str | None, pin_path: Path,
                 on_open: Callable[[Channel], None],
                 on_registered: Callable[[Channel], None],
                 heartbeat_s: float = HEARTBEAT_S, instances: Sequence[str] = ()) -> None:
        self._identity = identity
        self._heartbeat_s = heartbeat_s
        self._pin = HubPin(pin_path)
        self._on_open = on_open
        self._on_registered = on_registered
        self._url: str | None = None
        """The instance of the hub connected to now, or tried last."""
        self._configured: tuple[str, ...] = ()
        """The hub's URLs as ``anet join`` gave them (config.json)."""
        self._urls: tuple[str, ...] = ()
        """Those, then the instances the hub advertised (kept in the pin)."""
        self._failover: Failover | None = None
        self._state = JoinState.NOT_JOINED
        self._since: float | None = None
        self.retarget(url, instances)
        self._pacer = RequestPacer()
        self.hub_history: VerifiedHistory | None = None
        """The hub's key history as verified at the last handshake."""
        self.limits: Limits | None = None
        self._ws: aiohttp.ClientWebSocketResponse | None = None
        self._pending: dict[str, asyncio.Future[HubFrame]] = {}
        self._rids = itertools.count(1)
        self._http: aiohttp.ClientSession | None = None
        self._loop_task: asyncio.Task[None] | None = None
        self._attempted = asyncio.Event()

    @property
    def status(self) -> JoinStatus:
        return JoinStatus(self._state, self._url, self._since,
                          sentence(self._state, self._url, self._since, len(self._urls) - 1),
                          self._urls)

    @property
    def url(self) -> str | None:
        return self._url

    @property
    def urls(self) -> tuple[str, ...]:
        """The hub's instances this link tries, in order (none: not joined)."""
        return self._urls

    @property
    def state(self) -> JoinState:
        return self._state

    def require_registered(self) -> None:
        """Raise the HubError that says why this node cannot ask the hub now."""
        if self._state is not JoinState.REGISTERED:
            reason = {JoinState.NOT_JOINED: "not-joined", JoinState.PENDING: "not-approved",
                      JoinState.UNREACHABLE: "hub-unreachable"}.get(self._state, "hub-error")
            raise HubError(reason, self.status.sentence)

    # -- lifecycle ----------------------------------------------------------------------------

    def retarget(self, url: str | None, instances: Sequence[str] = ()) -> None:
        """Connect to the hub at ``url``, or else at one of its other ``instances`` (and those
        it advertised, when the pin is this hub's), from the next :meth:`start` (call it
        stopped)."""
        self._configured = tuple(dict.fromkeys(
            normalize_hub_url(each) for each in (url, *instances) if each)) if url else ()
        self._urls = self._configured
        self._url = self._urls[0] if self._urls else None
        if self._configured:
            self._follow(self._pin.instances(self._configured))
        self._set_state(JoinState.NOT_JOINED if self._url is None else JoinState.UNREACHABLE)

    async def start(self) -> None:
        """Connect in the background; wait briefly for the first attempt's outcome."""
        if self._url is None:
            return
        if self._http is None:
            # Headers that mean nothing to a WebSocket upgrade, which the hub would hold for as
            # long as the connection lasts.
            self._http = aiohttp.ClientSession(skip_auto_headers=UNSENT_HEADERS)
        self._attempted.clear()
        self._loop_task = asyncio.create_task(self._run(self._urls), name="hub-link")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._attempted.wait(), FIRST_ATTEMPT_WAIT_S)

    async def stop(self) -> None:
        task, self._loop_task, self._failover = self._loop_task, None, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task

    async def close(self) -> None:
        await self.stop()
        if self._http is not None:
            await self._http.close()
            self._http = None

    def _set_state(self, state: JoinState) -> None:
        self._state = state
        self._since = None if state is JoinState.NOT_JOINED else time.time()

    # -- requests -----------------------------------------------------------------------------

    async def request(self, frame: dict[str, Any], *, text: str | None = None) -> HubFrame:
        """Send a request and return its answer; an ``error`` answer raises HubError. Paced to
        the hub's limits; ``rate-limited`` is retried after ``retryAfter`` until
        ``RATE_LIMIT_DEADLINE_S`` after the first try. ``text`` is the frame encoded, when the
        caller has it already (:func:`compact_json`); ``frame`` then only names its type."""
        budget = RATE_LIMIT_DEADLINE_S
        deadline = time.monotonic() + budget
        encoded = compact_json(frame) if text is None else text
        while True:
            await self._pace(deadline, budget)
            answer = await self._request_once(encoded)
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
            bucket = self._pacer.bucket
            assert bucket is not None  # a delay comes from a bucket
            raise HubError("rate-limited", f"this node has more requests waiting than the hub "
                                           f"at {self._url} allows within {budget:g} s "
                                           f"({bucket.rate:g} requests/s, burst "
                                           f"{bucket.burst:g}); try again later")
        await asyncio.sleep(delay)

    async def _request_once(self, encoded: str) -> HubFrame:
        ws = self._ws
        if ws is None:
            raise HubError("hub-unreachable", self.status.sentence)
        rid = str(next(self._rids))
        loop = asyncio.get_running_loop()
        future: asyncio.Future[HubFrame] = loop.create_future()
        self._pending[rid] = future
        # A timer rather than asyncio.wait_for: one request per envelope sent, and wait_for
        # costs a task's worth of bookkeeping each time.
        timer = loop.call_later(REQUEST_TIMEOUT_S, _time_out, future)
        try:
            # The rid is digits: appended to the encoded object without escaping.
            await ws.send_str(f'{encoded[:-1]},"rid":"{rid}"}}')
            answer = await future
        except TimeoutError:
            raise HubError("hub-timeout", f"the hub at {self._url} did not answer within "
                                          f"{REQUEST_TIMEOUT_S:g} s") from None
        except (aiohttp.ClientError, ConnectionError) as error:
            raise HubError("hub-unreachable", f"the connection to {self._url} failed: "
                                              f"{error}") from None
        finally:
            timer.cancel()
            self._pending.pop(rid, None)
        return answer

    # -- the connection -----------------------------------------------------------------------

    async def _run(self, urls: tuple[str, ...]) -> None:
        """Stay connected to the hub at one of ``urls`` (its instances, in order): a connection
        that ends is followed by the next instance at once, a round of them all without a
        registration by a wait (:class:`Failover`)."""
        failover = self._failover = Failover(urls, RECONNECT)
        while True:
            url = self._url = failover.url
            registered = False
            try:
                registered = await self._connect_once(url)
            except Refusal as refusal:
                log.warning("event=hub-refused url=%s reason=%s detail=%r", url, refusal.reason,
                            refusal.message)
            except (aiohttp.ClientError, OSError, TimeoutError, ValidationError) as error:
                log.info("event=hub-unreachable url=%s error=%r", url, str(error) or type(error))
            if self._state is not JoinState.UNREACHABLE:
                self._set_state(JoinState.UNREACHABLE)
            self._attempted.set()
            delay = failover.next(connected=registered)
            log.debug("event=hub-retry url=%s in=%.1fs", failover.url, delay)
            await asyncio.sleep(delay)

    async def _connect_once(self, url: str) -> bool:
        """One connection, from handshake to close. True when it got as far as registering."""
        assert self._http is not None
        ws_url = url + WS_PATH
        async with self._http.ws_connect(ws_url, heartbeat=self._heartbeat_s, compress=0,
                                         max_msg_size=MAX_FRAME_BYTES,
                                         timeout=aiohttp.ClientWSTimeout(ws_close=5.0)) as ws:
            challenge = await self._receive(ws, ChallengeFrame)
            self.hub_history = self._check_hub(url, challenge)
            advertised = Advertised.checked(url, challenge.instances, self.hub_history)
            await ws.send_str(json.dumps(self._register_frame(ws_url, challenge)))
            registered = await self._receive(ws, RegisteredFrame)
            self._pin.write(url, self.hub_history, self._configured,
                            advertised.doc if advertised else None)
            if advertised is not None:
                self._follow(advertised.urls)
            self.limits = registered.limits
            self._pacer.configure(registered.limits.rate_per_second, registered.limits.burst)
            channel = Channel(ws)
            self._ws = ws
            try:
                self._on_open(channel)
                self._registered(registered, channel)
                async for message in ws:
                    if message.type is aiohttp.WSMsgType.TEXT:
                        self._on_frame(message.data, channel)
                    elif message.type is aiohttp.WSMsgType.ERROR:
                        break
                log.info("event=hub-closed url=%s code=%s", url, ws.close_code)
            finally:
                self._ws = None
                await channel.close()
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
            raise Refusal("hub-closed", f"the hub closed the connection "
                                        f"({ws.close_code}: {message.extra or 'no reason'})")
        frame = HUB_FRAME.validate_json(message.data)
        if isinstance(frame, ErrorFrame):
            raise Refusal(frame.reason, frame.message)
        if not isinstance(frame, expected):
            raise Refusal("hub-protocol", f"expected {expected.__name__}, got {frame.type}")
        return frame

    def _check_hub(self, url: str, challenge: ChallengeFrame) -> VerifiedHistory:
        """The hub's verified history, the same AID as pinned at first registration (at any of
        its instances: one hub, one identity), and a challenge signed by its current key."""
        pinned = self._pin.history(self._configured)
        try:
            history = verify_history(challenge.hub_history, expected_aid=challenge.hub_aid,
                                     known=pinned)
        except HistoryError as error:
            if error.reason == "wrong-aid":
                raise Refusal("hub-identity-changed",
                              f"the hub at {url} presents AID {challenge.hub_aid}, but "
                              f"{pinned.aid if pinned else '?'} was pinned at first "
                              f"registration; if its operator replaced it, run "
                              f"`anet join {url}` again") from None
            raise Refusal(f"hub-history-{error.reason}", str(error)) from None
        try:
            signature = decode_b64u(challenge.signature, what="challenge signature", length=64)
        except ValueError as error:
            raise Refusal("hub-bad-challenge", str(error)) from None
        signed = challenge_bytes(hub_aid=history.aid, nonce=challenge.nonce, ts=challenge.ts)
        if not verify_with_key(history.signing_key, CHALLENGE_CONTEXT, signed, signature):
            raise Refusal("hub-bad-challenge", f"the challenge from {url} is not signed by "
                                               f"the hub's key")
        return history

    def _register_frame(self, ws_url: str, challenge: ChallengeFrame) -> dict[str, Any]:
        return answer_challenge(self._identity, hub_aid=challenge.hub_aid, hub_url=ws_url,
                                nonce=challenge.nonce, ts=challenge.ts)

    def _registered(self, frame: RegisteredFrame, channel: Channel) -> None:
        state = JoinState.REGISTERED if frame.state == "registered" else JoinState.PENDING
        log.info("event=hub-%s url=%s aid=%s", frame.state, self._url, frame.aid)
        self._set_state(state)
        self._attempted.set()
        self._on_registered(channel)

    def _on_frame(self, text: str, channel: Channel) -> None:
        try:
            frame = HUB_FRAME.validate_json(text)
        except ValidationError as error:
            log.warning("event=hub-bad-frame error=%r", error.errors()[0]["msg"])
            return
        if isinstance(frame, DeliverFrame):
            if channel.on_deliver is not None:
                channel.on_deliver(frame.envelope)
        elif isinstance(frame, RegisteredFrame):
            self._registered(frame, channel)
        elif isinstance(frame, InstancesFrame):
            self._instances_changed(frame.instances)
        elif (rid := getattr(frame, "rid", None)) is not None and rid in self._pending:
            future = self._pending[rid]
            if not future.done():
                future.set_result(frame)
        elif isinstance(frame, ErrorFrame):
            log.warning("event=hub-error reason=%s message=%r", frame.reason, frame.message)

    # -- the hub's instances -----------------------------------------------------------------

    def _instances_changed(self, doc: dict[str, Any]) -> None:
        """The hub told of its instances as they are now (one started since this connection
        was made): kept with the pin, and followed."""
        history, url = self.hub_history, self._url
        if history is None or url is None:
            return
        advertised = Advertised.checked(url, doc, history)
        if advertised is not None:
            self._pin.write(url, history, self._configured, advertised.doc)
            self._follow(advertised.urls)

    def _follow(self, advertised: Sequence[str]) -> None:
        """Try the configured URLs, then ``advertised`` (the running link too, from its next
        attempt)."""
        self._urls = tuple(dict.fromkeys((*self._configured, *advertised)))
        if self._failover is not None:
            self._failover.update(self._urls)
