"""Federation: hubs of different operators that forward to each other (docs/hub.md "Federation").

Each operator names the other's hub, ``anet hub serve --federate AID@URL``: the hub then keeps a
link to that hub's WebSocket, answers its challenge with a ``federate`` frame signed by its own
operator key, and checks that the hub there presents the named AID. The other hub accepts the
link only if its operator named this hub too (else ``not-federated``): both operators authorised
it. Over the link go the two requests a hub cannot answer for an agent homed elsewhere:

``lookup``  an AID unknown here is looked up at the federated hubs; the home hub's answer (the
            agent's signed history and card) is passed on as is, and verifies wherever it is
            served
``send``    an envelope for such an agent is handed to its home hub, which stores it as for
            one of its own senders; the sender hears ``accepted`` only once it is stored there

A federated hub's requests are charged to a token bucket of their own (``--federation-rate``),
not to any agent's. Approval, the official list and reviews stay per hub: a link never writes
there.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import logging
import time
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp
from pydantic import ValidationError

from anet_core.api import (
    Backoff,
    Failover,
    HistoryError,
    Identity,
    TokenBucket,
    VerifiedHistory,
    b64u,
    is_aid,
    verify_history,
    verify_signature,
)
from anet_core.protocol.documents import DirectoryDocError, verify_hub_instances
from anet_core.protocol.frames import (
    CHALLENGE_CONTEXT,
    HUB_FRAME,
    WS_PATH,
    AcceptedFrame,
    ChallengeFrame,
    DirectoryEntry,
    EntryFrame,
    ErrorFrame,
    HubFrame,
    InstancesFrame,
    Refusal,
    RegisteredFrame,
    answer_challenge,
    challenge_bytes,
    hub_urls,
    normalize_hub_url,
)
from anet_hub.defaults import (
    DEFAULT_FEDERATION_BURST,
    DEFAULT_FEDERATION_RATE_PER_SECOND,
    DEFAULT_HEARTBEAT_S,
)
from anet_hub.storage import StorageError

log = logging.getLogger(__name__)

REQUEST_TIMEOUT_S = 15.0
HANDSHAKE_TIMEOUT_S = 10.0
RETRY = Backoff(first_s=0.5, cap_s=30.0, jitter=0.5)
"""After a round of the other hub's instances without a link."""
HOME_CACHE_S = 300.0
"""How long this hub remembers which federated hub is an agent's home."""


@dataclass(frozen=True)
class PeerHub:
    aid: str
    url: str
    """``ws://host:port`` or ``wss://host[/prefix]``: where its nodes reach it."""
    instances: tuple[str, ...] = ()
    """Its other instances' URLs: the link fails over to them (``AID@URL,URL…``)."""

    @property
    def urls(self) -> tuple[str, ...]:
        return (self.url, *self.instances)

    @classmethod
    def parse(cls, spec: str) -> PeerHub:
        aid, sep, listed = spec.partition("@")
        try:
            if not sep or not is_aid(aid):
                raise ValueError(aid)
            first, *instances = dict.fromkeys(map(normalize_hub_url, listed.split(",")))
        except ValueError:
            raise ValueError(f"--federate {spec!r}: expected AID@ws://HOST:PORT (the other hub's "
                             "AID, from its `GET /v1/hub`, and the URL its nodes use), then the "
                             "URLs of its other instances after commas") from None
        return cls(aid, first, tuple(instances))


@dataclass(frozen=True)
class FederationLimits:
    rate_per_second: float = DEFAULT_FEDERATION_RATE_PER_SECOND
    burst: int = DEFAULT_FEDERATION_BURST

    def __post_init__(self) -> None:
        if self.rate_per_second <= 0 or self.burst < 1:
            raise ValueError("--federation-rate and --federation-burst must be positive")


class SavedInstances(Protocol):
    """Where the instances federated hubs advertised are kept (the hub's storage: shared by
    the instances of a cluster, so each knows what any of them learnt)."""

    async def peer_instances(self, aid: str) -> list[str]: ...

    async def save_peer_instances(self, aid: str, urls: list[str]) -> None: ...


class LinkDown(Exception):
    """The link to a federated hub is not up (``reason`` says why)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass
class PeerLink:
    """This hub's connection to one federated hub, kept up with backoff."""

    peer: PeerHub
    identity: Identity
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    url: str = ""
    """The instance of the other hub linked to now, or tried last."""
    state: str = "connecting"
    """``up``, ``connecting``, or the reason of the last refusal (``not-federated``…)."""
    detail: str = ""
    saved: SavedInstances | None = None
    advertised: tuple[str, ...] = ()
    """The instances the other hub advertised (signed) in its last challenge, or as saved."""
    _failover: Failover | None = None
    _history: VerifiedHistory | None = None
    """The other hub's, as verified in its last challenge."""
    _told: asyncio.Task[None] | None = None
    _ws: aiohttp.ClientWebSocketResponse | None = None
    _pending: dict[str, asyncio.Future[HubFrame]] = field(default_factory=dict)
    _rids: itertools.count[int] = field(default_factory=itertools.count)

    @property
    def up(self) -> bool:
        return self._ws is not None and not self._ws.closed

    @property
    def urls(self) -> tuple[str, ...]:
        """The other hub's instances the link tries: named in ``--federate``, then
        advertised."""
        return tuple(dict.fromkeys((*self.peer.urls, *self.advertised)))

    async def run_forever(self, http: aiohttp.ClientSession) -> None:
        """Keep the link up at one of the other hub's instances: the next at once after a
        link ends, a wait after a round of them all failed (:class:`Failover`)."""
        await self._read_saved()
        failover = self._failover = Failover(self.urls, RETRY)
        while True:
            self.url = failover.url
            was_up = False
            try:
                was_up = await self._connect_once(http)
            except LinkDown as down:
                self.state, self.detail = down.reason, down.message
                log.warning("event=federation-refused peer=%s reason=%s detail=%r",
                            self.peer.aid, down.reason, down.message)
            except (aiohttp.ClientError, OSError, TimeoutError, ValidationError) as error:
                self.state, self.detail = "unreachable", str(error) or type(error).__name__
                log.info("event=federation-unreachable peer=%s url=%s error=%r", self.peer.aid,
                         self.url, self.detail)
            await asyncio.sleep(failover.next(connected=was_up))

    async def _connect_once(self, http: aiohttp.ClientSession) -> bool:
        """One link, from handshake to close: True once it came up (and ended)."""
        ws_url = self.url + WS_PATH
        async with http.ws_connect(ws_url, heartbeat=self.heartbeat_s, max_msg_size=0) as ws:
            challenge = await self._receive(ws, ChallengeFrame)
            self._history = self._check_peer(challenge)
            await self._follow(challenge.instances, self._history)
            await ws.send_str(json.dumps(answer_challenge(
                self.identity, hub_aid=challenge.hub_aid, hub_url=ws_url,
                nonce=challenge.nonce, ts=challenge.ts, frame_type="federate")))
            await self._receive(ws, RegisteredFrame)
            self._ws, self.state, self.detail = ws, "up", ""
            log.info("event=federation-up peer=%s url=%s", self.peer.aid, self.url)
            try:
                async for message in ws:
                    if message.type is aiohttp.WSMsgType.TEXT:
                        self._on_answer(message.data)
                log.info("event=federation-closed peer=%s url=%s code=%s", self.peer.aid,
                         self.url, ws.close_code)
            finally:
                self._ws = None
                self.state = "connecting"
                for future in self._pending.values():
                    if not future.done():
                        future.set_exception(LinkDown("peer-hub-unreachable",
                                                      f"the link to {self.url} closed"))
                self._pending.clear()
            return True

    async def _receive(self, ws: aiohttp.ClientWebSocketResponse,
                       expected: type[ChallengeFrame | RegisteredFrame]) -> Any:
        message = await ws.receive(timeout=HANDSHAKE_TIMEOUT_S)
        if message.type is not aiohttp.WSMsgType.TEXT:
            raise LinkDown("peer-hub-closed", f"{self.url} closed the link")
        frame = HUB_FRAME.validate_json(message.data)
        if isinstance(frame, ErrorFrame):
            raise LinkDown(frame.reason, frame.message)
        if not isinstance(frame, expected):
            raise LinkDown("peer-hub-protocol", f"expected {expected.__name__}, got {frame.type}")
        return frame

    def _check_peer(self, challenge: ChallengeFrame) -> VerifiedHistory:
        """The hub at the URL is the one the operator named, and signed the challenge: its
        history."""
        if challenge.hub_aid != self.peer.aid:
            raise LinkDown("peer-hub-identity", f"the hub at {self.url} is "
                                                f"{challenge.hub_aid}, not {self.peer.aid} as "
                                                "named in --federate")
        try:
            history = verify_history(challenge.hub_history, expected_aid=self.peer.aid)
        except HistoryError as error:
            raise LinkDown("peer-hub-identity", f"{self.url}: {error}") from None
        signed = challenge_bytes(hub_aid=history.aid, nonce=challenge.nonce, ts=challenge.ts)
        if not verify_signature(b64u(history.signing_key), signed, challenge.signature,
                                context=CHALLENGE_CONTEXT):
            raise LinkDown("peer-hub-identity", f"the challenge from {self.url} is not "
                                                "signed by its hub's key")
        return history

    async def _read_saved(self) -> None:
        """What an instance of this hub saved of the other hub's instances: a link that starts
        while the URLs named in ``--federate`` are down still finds the others."""
        if self.saved is None:
            return
        try:
            self.advertised = hub_urls(await self.saved.peer_instances(self.peer.aid))[0]
        except StorageError as error:
            log.warning("event=federation-instances-unread peer=%s reason=%s", self.peer.aid,
                        error.reason)

    async def _follow(self, doc: dict[str, Any] | None, history: VerifiedHistory) -> None:
        """Fail over to the instances the other hub advertised too, from now on, and save
        them for this hub's other instances and its next start."""
        if doc is None:
            return
        try:
            listed = verify_hub_instances(doc, history)
        except DirectoryDocError as error:
            log.warning("event=federation-instances-ignored peer=%s reason=%s", self.peer.aid,
                        error.reason)
            return
        advertised, ignored = hub_urls(listed.urls)
        if ignored:
            log.warning("event=federation-instances-ignored peer=%s urls=%r", self.peer.aid,
                        ignored)
        if advertised == self.advertised:
            return
        self.advertised = advertised
        if self._failover is not None:
            self._failover.update(self.urls)
        if self.saved is not None:
            try:
                await self.saved.save_peer_instances(self.peer.aid, list(advertised))
            except StorageError as error:
                log.warning("event=federation-instances-unsaved peer=%s reason=%s",
                            self.peer.aid, error.reason)

    def _on_answer(self, text: str) -> None:
        try:
            frame = HUB_FRAME.validate_json(text)
        except ValidationError:
            log.warning("event=federation-bad-frame peer=%s", self.peer.aid)
            return
        if isinstance(frame, InstancesFrame) and self._history is not None:
            # The other hub's instances changed: followed (and saved) in the background.
            self._told = asyncio.create_task(self._follow(frame.instances, self._history))
            return
        rid = getattr(frame, "rid", None)
        future = self._pending.get(rid) if rid is not None else None
        if future is not None and not future.done():
            future.set_result(frame)

    async def request(self, frame: dict[str, Any]) -> HubFrame:
        ws = self._ws
        if ws is None or ws.closed:
            raise LinkDown(self.state if self.state != "up" else "peer-hub-unreachable",
                           self.detail or f"no link to {self.url} now")
        rid = f"f{next(self._rids)}"
        future: asyncio.Future[HubFrame] = asyncio.get_running_loop().create_future()
        self._pending[rid] = future
        try:
            await ws.send_str(json.dumps({**frame, "rid": rid}, ensure_ascii=False))
            return await asyncio.wait_for(future, REQUEST_TIMEOUT_S)
        except TimeoutError:
            raise LinkDown("peer-hub-timeout", f"{self.url} did not answer within "
                                               f"{REQUEST_TIMEOUT_S:g} s") from None
        except (aiohttp.ClientError, ConnectionError) as error:
            raise LinkDown("peer-hub-unreachable", f"{self.url}: {error}") from None
        finally:
            self._pending.pop(rid, None)


@dataclass
class FederationService:
    """The federated hubs of this hub: links out, admission of theirs in."""

    identity: Identity
    peers: dict[str, PeerHub]
    limits: FederationLimits = field(default_factory=FederationLimits)
    heartbeat_s: float = DEFAULT_HEARTBEAT_S
    saved: SavedInstances | None = None
    links: dict[str, PeerLink] = field(default_factory=dict)
    _homes: dict[str, tuple[str, float]] = field(default_factory=dict)
    _buckets: dict[str, TokenBucket] = field(default_factory=dict)
    _http: aiohttp.ClientSession | None = None
    _tasks: list[asyncio.Task[None]] = field(default_factory=list)

    async def start(self) -> None:
        self._http = aiohttp.ClientSession()
        for peer in self.peers.values():
            link = self.links[peer.aid] = PeerLink(peer, self.identity, self.heartbeat_s,
                                                   saved=self.saved)
            self._tasks.append(asyncio.create_task(link.run_forever(self._http)))

    async def close(self) -> None:
        for task in self._tasks:
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        if self._http is not None:
            await self._http.close()

    # -- their requests -------------------------------------------------------------------------

    def is_peer(self, aid: str) -> bool:
        return aid in self.peers

    def admit(self, peer_aid: str) -> None:
        """Charge one request of a federated hub; ``rate-limited`` beyond its limit."""
        now = time.monotonic()
        bucket = self._buckets.get(peer_aid)
        if bucket is None:
            bucket = self._buckets[peer_aid] = TokenBucket(
                self.limits.rate_per_second, self.limits.burst, now=now)
        wait = bucket.take(now)
        if wait:
            raise Refusal("rate-limited", f"more than {self.limits.rate_per_second:g} requests/s "
                                          f"from the federated hub {peer_aid}; retry after "
                                          f"{wait:.2f} s", retry_after=round(wait, 3))

    # -- ours -----------------------------------------------------------------------------------

    async def lookup(self, aid: str) -> DirectoryEntry:
        """The entry of ``aid`` from its home hub among the federated ones."""
        entry, _ = await self._find(aid)
        return entry

    async def forward(self, recipient: str, envelope: dict[str, object]) -> str:
        home = self._home(recipient)
        if home is None:
            _, home = await self._find(recipient)
        try:
            answer = await self.links[home].request({"type": "send", "envelope": envelope})
        except LinkDown as down:
            raise _retry_later(down) from None
        if isinstance(answer, AcceptedFrame):
            log.debug("event=forwarded to=%s peer=%s id=%s", recipient, home, answer.id)
            return answer.id
        if isinstance(answer, ErrorFrame):
            if answer.reason == "unknown-recipient":
                self._homes.pop(recipient, None)
            raise Refusal(answer.reason, f"the home hub of {recipient} ({self.links[home].url}) "
                                         f"refused it: {answer.message}",
                          retry_after=answer.retry_after)
        raise Refusal("peer-hub-protocol", f"{self.links[home].url} answered {answer.type}")

    def _home(self, aid: str) -> str | None:
        known = self._homes.get(aid)
        if known is not None and known[1] > time.monotonic():
            return known[0]
        return None

    async def _find(self, aid: str) -> tuple[DirectoryEntry, str]:
        """Ask every federated hub that is up; the first entry wins."""
        links = [link for link in self.links.values() if link.up]
        answers = await asyncio.gather(*(link.request({"type": "lookup", "aid": aid})
                                         for link in links), return_exceptions=True)
        for link, answer in zip(links, answers, strict=True):
            if isinstance(answer, EntryFrame) and answer.entry.aid == aid:
                self._homes[aid] = (link.peer.aid, time.monotonic() + HOME_CACHE_S)
                return answer.entry, link.peer.aid
        refused = [link for link in self.links.values() if link.state == "not-federated"]
        down = [link for link in self.links.values()
                if not link.up and link.state != "not-federated"]
        if refused and not down:
            names = ", ".join(f"{link.peer.aid} at {link.url}" for link in refused)
            raise Refusal("not-federated",
                          f"{aid} is not homed at this hub nor at a hub federated with it; "
                          f"the hub {names} does not federate with this hub (its operator has "
                          f"to add --federate {self.identity.aid}@<this hub's URL>)")
        if down:
            raise _retry_later(LinkDown("peer-hub-unreachable",
                                        f"{aid} is not homed here, and the federated hub "
                                        f"{down[0].url} cannot be asked now "
                                        f"({down[0].state}: {down[0].detail})"))
        raise Refusal("unknown-agent", f"{aid} is not homed at this hub nor at the hubs "
                                       f"federated with it ({len(self.links)})")


def _retry_later(down: LinkDown) -> Refusal:
    """A link that is down is tried again; one the other hub refuses, only by its operator."""
    if down.reason == "not-federated":
        return Refusal("not-federated", f"the agent's home hub no longer federates with this "
                                        f"hub: {down.message}")
    return Refusal("peer-hub-unreachable", f"{down.message}; send it again later")


def parse_peers(specs: list[str]) -> dict[str, PeerHub]:
    peers = [PeerHub.parse(spec) for spec in specs]
    return {peer.aid: peer for peer in peers}

