"""One node's WebSocket session at the hub: challenge, registration, approval, then requests.

A federated hub opens a session too (``federate`` instead of ``register``, anet_hub.federation):
it may then only look up and send to the agents homed here.

Every frame is parsed with the models of ``frames``; anything wrong with a frame is answered
with an ``error`` frame and the session goes on. Nothing a node sends can end the hub.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any

from aiohttp import WSMsgType, web
from pydantic import ValidationError

from anet_core.api import UnencodableText, b64u, check_value, load_json, may_hold_surrogate
from anet_core.protocol.frames import (
    CHALLENGE_CONTEXT,
    CHALLENGE_TTL_S,
    NODE_FRAME,
    AcceptedFrame,
    AckFrame,
    ChallengeFrame,
    EntryFrame,
    ErrorFrame,
    FederateFrame,
    Limits,
    LookupFrame,
    NodeFrame,
    OkFrame,
    PublishFrame,
    Refusal,
    RegisteredFrame,
    RegisterFrame,
    ResultsFrame,
    ReviewFrame,
    SearchFrame,
    SendFrame,
    challenge_bytes,
)
from anet_hub.delivery import Connection
from anet_hub.directory import Challenge, check_answer, check_challenge
from anet_hub.storage import AgentState, StorageError

if TYPE_CHECKING:
    from anet_hub.app import HubState

log = logging.getLogger(__name__)

APPROVAL_POLL_S = 1.0
"""How often a pending session looks whether ``anet hub approve`` (another process) approved it."""
NONCE_BYTES = 32
_ENDED = (WSMsgType.CLOSE, WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR)
"""What ``receive`` returns as a connection ends (its heartbeat unanswered, too): no frame of
the peer's, so no sign of life."""


class Session:
    __slots__ = ("_tasks", "aid", "challenge", "conn", "hub", "last_frame_at", "peer_hub",
                 "remote", "transport", "ws")

    def __init__(self, hub: HubState, ws: web.WebSocketResponse, *, remote: str,
                 transport: asyncio.Transport | None, authorities: frozenset[str]) -> None:
        self.hub = hub
        self.ws = ws
        self.transport = transport
        self.remote = remote
        self.challenge: Challenge | None = Challenge(
            hub_aid=hub.identity.aid, nonce=b64u(os.urandom(NONCE_BYTES)), ts=int(time.time()),
            authorities=authorities)
        self.aid: str | None = None
        self.peer_hub = False  # True when ``aid`` is a federated hub, not an agent
        self.conn: Connection | None = None
        self.last_frame_at = time.time()
        """When the peer's last frame arrived, a ping or a pong too: its ``lastSeen`` once it
        is gone (a peer that froze is gone a heartbeat and a half later)."""
        # Work that lasts as long as the session (waiting for approval), made when needed.
        self._tasks: set[asyncio.Task[None]] | None = None

    async def run(self) -> None:
        try:
            await self._send(self._challenge_frame())
            await self._first_frame()
            if self.aid is None:
                return  # no registration: nothing else is answered on this connection
            self.challenge = None  # answered: nothing asks for it again
            while True:  # not ``async for``: one coroutine frame less per open connection
                message = await self.ws.receive()
                if message.type in _ENDED:
                    return
                self.last_frame_at = time.time()
                if message.type is WSMsgType.TEXT:
                    await self._handle_text(message.data)
                elif message.type is WSMsgType.PING:
                    await self.ws.pong(message.data)
                elif message.type is WSMsgType.BINARY:
                    await self._send(ErrorFrame(reason="bad-frame",
                                                message="frames are JSON text, not binary"))
                # An idle connection keeps nothing of its last frame (an envelope may be large).
                del message
        except TimeoutError:
            await self._send(ErrorFrame(reason="challenge-expired",
                                        message=f"no registration within {CHALLENGE_TTL_S:g} s"))
        except ConnectionError:
            pass  # the node went away mid-send; the finally below cleans up
        finally:
            await self._end()

    async def _first_frame(self) -> None:
        """The answer to the challenge (``register`` or ``federate``), within its time."""
        async with asyncio.timeout(CHALLENGE_TTL_S):
            first = await self.ws.receive()
            while first.type is WSMsgType.PING:  # a peer's heartbeat may come first
                await self.ws.pong(first.data)
                first = await self.ws.receive()
        self.last_frame_at = time.time()
        if first.type is WSMsgType.TEXT:
            await self._handle_text(first.data)

    def _challenge_frame(self) -> ChallengeFrame:
        challenge = self.challenge
        assert challenge is not None
        signature = self.hub.identity.sign(
            challenge_bytes(hub_aid=challenge.hub_aid, nonce=challenge.nonce, ts=challenge.ts),
            context=CHALLENGE_CONTEXT)
        return ChallengeFrame(hub_aid=challenge.hub_aid, hub_history=self.hub.identity.history,
                              nonce=challenge.nonce, ts=challenge.ts, signature=b64u(signature),
                              instances=self.hub.advertisement.doc)

    async def _handle_text(self, text: str) -> None:
        # Strict JSON first: NaN, lone surrogates and deep nesting are refused before anything
        # can store, echo or recurse into them.
        try:
            document = load_json(text)
        except ValueError as error:
            await self._bad_frame("(frame)", f"not JSON: {error}", rid=None)
            return
        try:
            if may_hold_surrogate(text):
                check_value(document)
        except UnencodableText as error:
            await self._bad_frame(error.where, str(error), rid=None if error.where == "rid"
                                  else _rid_of(document))
            return
        try:
            frame = NODE_FRAME.validate_python(document)
        except ValidationError as error:
            first = error.errors()[0]
            await self._bad_frame(".".join(map(str, first["loc"])) or "(frame)", first["msg"],
                                  rid=_rid_of(document))
            return
        try:
            await self._dispatch(frame, len(text))
        except Refusal as refusal:
            self.hub.relay.metrics.refused.labels(refusal.reason).inc()
            await self._send(refusal.frame(_rid(frame)))
        except StorageError as error:
            log.error("event=storage-error aid=%s reason=%s", self.aid, error.reason)
            await self._send(ErrorFrame(rid=_rid(frame), reason=error.reason,
                                        message=f"{error.message}; try again later"))
        except ConnectionError:
            raise
        except Exception:
            log.exception("event=internal-error aid=%s frame=%s", self.aid, frame.type)
            await self._send(ErrorFrame(rid=_rid(frame), reason="hub-internal-error",
                                        message="the hub failed on this request; it is logged"))

    async def _bad_frame(self, where: str, detail: str, *, rid: str | None) -> None:
        log.warning("event=bad-frame aid=%s remote=%s where=%s detail=%r", self.aid,
                    self.remote, where, detail)
        await self._send(ErrorFrame(rid=rid, reason="bad-frame",
                                    message=f"the frame is invalid at {where}: {detail}"))

    async def _dispatch(self, frame: NodeFrame, size: int) -> None:
        if isinstance(frame, FederateFrame):  # before RegisterFrame: it is one
            await self._federate(frame)
            return
        if isinstance(frame, RegisterFrame):
            await self._register(frame)
            return
        aid = self.aid
        if aid is None:
            raise Refusal("not-registered", "answer the challenge with a register frame first")
        if self.peer_hub:
            await self._peer_request(aid, frame, size)
            return
        if isinstance(frame, AckFrame):
            if self.conn is not None:
                await self.hub.relay.ack(self.conn, frame.id)
            return
        await self.hub.relay.admit_request(aid)
        if isinstance(frame, PublishFrame):
            await self.hub.directory.publish_card(aid, frame.card)
            log.info("event=card-published aid=%s", aid)
            await self._send(OkFrame(rid=frame.rid))
            return
        if self.conn is None:
            raise Refusal("not-approved", "this node waits for the hub operator's approval "
                                          f"(`anet hub approve {aid}`)")
        if isinstance(frame, SendFrame):
            envelope_id = await self.hub.relay.submit(aid, frame.envelope, size, rid=frame.rid,
                                                      reply_to=self.conn)
            if envelope_id is not None:
                await self._send(AcceptedFrame(rid=frame.rid, id=envelope_id))
        elif isinstance(frame, LookupFrame):
            entry = await self.hub.directory.lookup(frame.aid)
            await self._send(EntryFrame(rid=frame.rid, entry=entry,
                                        official_list=await self.hub.official_list()))
        elif isinstance(frame, SearchFrame):
            entries, cursor = await self.hub.directory.search(frame)
            await self._send(ResultsFrame(rid=frame.rid, entries=entries, next_cursor=cursor,
                                          official_list=await self.hub.official_list()))
        elif isinstance(frame, ReviewFrame):
            record = await self.hub.directory.post_review(aid, frame.review)
            log.info("event=review aid=%s subject=%s rating=%d", aid, record.subject,
                     record.rating)
            await self._send(OkFrame(rid=frame.rid))

    async def _federate(self, frame: FederateFrame) -> None:
        federation = self.hub.federation
        if self.aid is not None:
            raise Refusal("already-registered", f"this connection is registered as {self.aid}")
        if federation is None or not federation.is_peer(frame.aid):
            log.warning("event=federation-refused aid=%s remote=%s", frame.aid, self.remote)
            raise Refusal("not-federated", f"this hub ({self.hub.identity.aid}) does not "
                                           f"federate with the hub {frame.aid}; its operator "
                                           f"would add --federate {frame.aid}@<its URL>")
        assert self.challenge is not None  # kept until a register or federate frame is taken
        check_challenge(frame, self.challenge)
        check_answer(frame, self.challenge, None)
        self.aid, self.peer_hub = frame.aid, True
        log.info("event=federated aid=%s remote=%s", frame.aid, self.remote)
        limits = federation.limits
        await self._send(RegisteredFrame(aid=frame.aid, state="registered", limits=Limits(
            max_envelope_bytes=self.hub.relay.limits.max_envelope_bytes,
            rate_per_second=limits.rate_per_second, burst=limits.burst,
            queue_ttl_seconds=self.hub.relay.limits.queue_ttl_s)))

    async def _peer_request(self, peer: str, frame: NodeFrame, size: int) -> None:
        """What a federated hub may ask: about, and for, the agents homed here."""
        assert self.hub.federation is not None
        self.hub.federation.admit(peer)
        if isinstance(frame, LookupFrame):
            entry = await self.hub.directory.lookup(frame.aid, here_only=True)
            await self._send(EntryFrame(rid=frame.rid, entry=entry))
        elif isinstance(frame, SendFrame):
            envelope_id = await self.hub.relay.submit(peer, frame.envelope, size, rid=frame.rid,
                                                      via_hub=peer)
            assert envelope_id is not None  # without a connection to answer on, it is stored
            await self._send(AcceptedFrame(rid=frame.rid, id=envelope_id))
        else:
            raise Refusal("not-allowed", f"a federated hub may send lookup and send, not "
                                         f"{frame.type}")

    async def _register(self, frame: RegisterFrame) -> None:
        if self.aid is not None:
            raise Refusal("already-registered", f"this connection is registered as {self.aid}")
        try:
            assert self.challenge is not None  # kept until a register frame is taken
            record = await self.hub.directory.register(frame, self.challenge)
        except Refusal as refusal:
            log.warning("event=register-refused aid=%s remote=%s reason=%s", frame.aid,
                        self.remote, refusal.reason)
            raise
        self.aid = record.aid
        log.info("event=registered aid=%s state=%s keySeq=%d remote=%s", record.aid,
                 record.state.value, record.key_seq, self.remote)
        if record.state is AgentState.REGISTERED:
            await self._go_live()
        else:
            await self._send(RegisteredFrame(aid=record.aid, state="pending",
                                              limits=self._limits()))
            self._spawn(self._await_approval())

    async def _go_live(self) -> None:
        assert self.aid is not None
        self.conn = self.hub.relay.connection(self.aid, self.ws, self.transport)
        replaced = await self.hub.relay.attach(self.conn)
        if replaced is not None:
            log.info("event=replaced aid=%s", self.aid)
            await replaced.ws.close(code=4001, message=b"replaced by a newer connection")
        await self._send(RegisteredFrame(aid=self.aid, state="registered", limits=self._limits()))
        self.conn.start()

    async def _await_approval(self) -> None:
        assert self.aid is not None
        while True:
            await asyncio.sleep(APPROVAL_POLL_S)
            try:
                record = await self.hub.storage.get_agent(self.aid)
            except StorageError:
                continue
            if record is not None and record.state is AgentState.REGISTERED:
                log.info("event=approved aid=%s", self.aid)
                await self._go_live()
                return

    def _limits(self) -> Limits:
        limits = self.hub.relay.limits
        return Limits(max_envelope_bytes=limits.max_envelope_bytes,
                      rate_per_second=limits.rate_per_second, burst=limits.burst,
                      queue_ttl_seconds=limits.queue_ttl_s)

    def _spawn(self, coroutine: Coroutine[Any, Any, None]) -> None:
        task = asyncio.create_task(coroutine)
        if self._tasks is None:
            self._tasks = set()
        self._tasks.add(task)
        task.add_done_callback(self._task_done)

    def _task_done(self, task: asyncio.Task[None]) -> None:
        if self._tasks is not None:
            self._tasks.discard(task)
        if not task.cancelled() and task.exception() is not None \
                and not isinstance(task.exception(), ConnectionError):
            log.error("event=session-task-failed aid=%s error=%r", self.aid, task.exception())
            asyncio.ensure_future(self.ws.close(code=1011, message=b"hub session failed"))

    async def _send(self, frame: ErrorFrame | ChallengeFrame | RegisteredFrame | AcceptedFrame
                    | EntryFrame | ResultsFrame | OkFrame) -> None:
        if not self.ws.closed:
            await self.ws.send_str(frame.dump())

    async def _end(self) -> None:
        if self._tasks:
            for task in list(self._tasks):
                task.cancel()
            await asyncio.gather(*self._tasks, return_exceptions=True)
        if self.conn is not None:
            await self.hub.relay.detach(self.conn)
        if self.aid is not None and not self.peer_hub:
            try:
                await self.hub.storage.touch(self.aid, self.last_frame_at)
            except StorageError:
                pass  # lastSeen stays at the registration time: harmless
            log.info("event=disconnected aid=%s remote=%s", self.aid, self.remote)


def _rid(frame: NodeFrame) -> str | None:
    """The request id of a frame, asked for only to answer it with an error: most frames a
    node sends are acknowledgements, which have none, and a pydantic model finds a missing
    attribute slowly (``__getattr__`` raising)."""
    return getattr(frame, "rid", None)


def _rid_of(document: Any) -> str | None:
    """The request id of a frame that failed validation, when it has a usable one."""
    rid = document.get("rid") if isinstance(document, dict) else None
    return rid if isinstance(rid, str) and 0 < len(rid) <= 64 else None
