"""The hub's WebSocket protocol: every frame as a pydantic model, and the limits both sides know.

Frames are JSON text messages with a ``type``. Requests from the node carry an ``rid`` (request
id, chosen by the node) that the hub repeats in the answer, so answers may be matched while
``deliver`` frames arrive in between. docs/protocol.md ("Hub registration", "Relay and
delivery", "Directory") describes each frame.

The hub parses what it receives strictly (unknown fields refused: a typo is an error, not a
silent no-op); the node parses what it receives leniently (unknown fields ignored), so a newer hub
can add fields without breaking older nodes.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING, Annotated, Any, Literal
from urllib.parse import urlsplit, urlunsplit

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter
from pydantic.alias_generators import to_camel

from anet_core.errors import ReasonError
from anet_core.identity.history import MAX_HISTORY_LENGTH
from anet_core.protocol.fields import Aid
from anet_core.util.canonical import b64u, canonical_json

if TYPE_CHECKING:
    from anet_core.identity import Identity

PROTOCOL_VERSION = 1

WS_PATH = "/v1/ws"
"""Where nodes connect; the HTTP reads (docs/hub.md) live beside it under ``/v1/``."""

REGISTER_CONTEXT = "anet-hub-register-v1"
"""Signature context of a node's answer to a challenge (see ``registration_bytes``)."""
CHALLENGE_CONTEXT = "anet-hub-challenge-v1"
"""Signature context of the hub's challenge, so a node knows it speaks to the hub it pinned."""

CHALLENGE_TTL_S = 60.0
"""A registration must answer the challenge of its own connection within this time."""

MAX_SEARCH_LIMIT = 100
DEFAULT_SEARCH_LIMIT = 50

RequestId = Annotated[str, StringConstraints(min_length=1, max_length=64)]
ShortText = Annotated[str, StringConstraints(max_length=200)]
B64Text = Annotated[str, StringConstraints(min_length=1, max_length=200)]


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


def hub_urls(urls: Iterable[str]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``urls`` normalized (in order, without repeats), and those that are no hub URL."""
    good, bad = [], []
    for url in urls:
        try:
            good.append(normalize_hub_url(url))
        except ValueError:
            bad.append(url)
    return tuple(dict.fromkeys(good)), tuple(bad)


def registration_bytes(*, hub_aid: str, hub_url: str, nonce: str, ts: int, aid: str,
                       key_seq: int) -> bytes:
    """What a node signs to register: the hub's challenge bound to the hub's identity and URL.

    The nonce is fresh per connection, ``hubAid`` and ``hubUrl`` name the hub the node meant to
    reach: an answer cannot be replayed on another connection or relayed to another hub.
    """
    return canonical_json({"type": "anet.hub-register", "hubAid": hub_aid, "hubUrl": hub_url,
                           "nonce": nonce, "ts": ts, "aid": aid, "keySeq": key_seq})


def answer_challenge(identity: Identity, *, hub_aid: str, hub_url: str, nonce: str, ts: int,
                     frame_type: Literal["register", "federate"] = "register") -> dict[str, Any]:
    """The ``register`` frame (or a hub's ``federate`` frame) answering a challenge, signed by
    the current key of ``identity`` for the URL it dialled."""
    signer = identity.signer()
    signed = registration_bytes(hub_aid=hub_aid, hub_url=hub_url, nonce=nonce, ts=ts,
                                aid=signer.aid, key_seq=signer.key_seq)
    return {"type": frame_type, "aid": signer.aid, "history": identity.history,
            "hubUrl": hub_url, "nonce": nonce, "ts": ts,
            "signature": b64u(signer.sign(signed, context=REGISTER_CONTEXT))}


def challenge_bytes(*, hub_aid: str, nonce: str, ts: int) -> bytes:
    """What the hub signs in its challenge."""
    return canonical_json({"type": "anet.hub-challenge", "hubAid": hub_aid, "nonce": nonce,
                           "ts": ts})


class _Inbound(BaseModel):
    """A frame the hub receives: strict."""

    model_config = ConfigDict(extra="forbid", frozen=True, alias_generator=to_camel,
                              populate_by_name=True)


class _Outbound(BaseModel):
    """A frame the node receives: unknown fields ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True, alias_generator=to_camel,
                              populate_by_name=True)

    def dump(self) -> str:
        return self.model_dump_json(by_alias=True)


# -- node → hub ---------------------------------------------------------------------------------


class RegisterFrame(_Inbound):
    type: Literal["register"]
    aid: Aid
    history: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_HISTORY_LENGTH)
    hub_url: Annotated[str, StringConstraints(min_length=1, max_length=2048)]
    nonce: B64Text
    ts: int
    signature: B64Text


class FederateFrame(RegisterFrame):  # type: ignore[override]
    """A hub answering another hub's challenge: the same proof as ``register``, signed with the
    calling hub's operator key. Accepted only from a hub the answering hub's operator named
    (``anet hub serve --federate AID@URL``); refused ``not-federated`` otherwise. The
    connection then carries ``lookup`` and ``send`` for the agents homed at the answering hub."""

    type: Literal["federate"]  # type: ignore[assignment]


class SendFrame(_Inbound):
    type: Literal["send"]
    rid: RequestId
    envelope: dict[str, Any]


class AckFrame(_Inbound):
    type: Literal["ack"]
    id: Annotated[str, StringConstraints(min_length=1, max_length=64)]


class PublishFrame(_Inbound):
    type: Literal["publish"]
    rid: RequestId
    card: dict[str, Any]


class LookupFrame(_Inbound):
    type: Literal["lookup"]
    rid: RequestId
    aid: Aid


class SearchFrame(_Inbound):
    type: Literal["search"]
    rid: RequestId
    skill: ShortText | None = None
    tag: ShortText | None = None
    q: ShortText | None = None
    cursor: Annotated[str, StringConstraints(max_length=512)] | None = None
    limit: int = Field(default=DEFAULT_SEARCH_LIMIT, ge=1, le=MAX_SEARCH_LIMIT)


class ReviewFrame(_Inbound):
    type: Literal["review"]
    rid: RequestId
    review: dict[str, Any]


NodeFrame = Annotated[
    RegisterFrame | FederateFrame | SendFrame | AckFrame | PublishFrame | LookupFrame | SearchFrame
    | ReviewFrame, Field(discriminator="type")]
NODE_FRAME: TypeAdapter[NodeFrame] = TypeAdapter(NodeFrame)


# -- hub → node ---------------------------------------------------------------------------------


class ChallengeFrame(_Outbound):
    type: Literal["challenge"] = "challenge"
    version: int = PROTOCOL_VERSION
    hub_aid: str
    hub_history: list[dict[str, Any]]
    nonce: str
    ts: int
    signature: str
    instances: dict[str, Any] | None = None
    """The hub's signed ``anet.hub-instances`` document, when it advertises any: the URLs of
    its instances, which the node (or federated hub) fails over to."""


class Limits(_Outbound):
    """The per-node limits the hub enforces, told at registration so a node can refuse early."""

    max_envelope_bytes: int
    rate_per_second: float
    burst: int
    queue_ttl_seconds: float


class RegisteredFrame(_Outbound):
    """Sent after ``register``; sent again with ``state="registered"`` when a pending node is
    approved."""

    type: Literal["registered"] = "registered"
    aid: str
    state: Literal["pending", "registered"]
    limits: Limits


class AcceptedFrame(_Outbound):
    """The envelope is stored at the hub; the sender may forget it."""

    type: Literal["accepted"] = "accepted"
    rid: str
    id: str


class DeliverFrame(_Outbound):
    """An envelope for this node; the node answers ``ack`` with its id once it kept it."""

    type: Literal["deliver"] = "deliver"
    envelope: dict[str, Any]
    queued_at: float


class DirectoryEntry(_Outbound):
    """An agent as the hub holds it. Only ``history`` and ``card`` are signed (by the agent);
    ``lastSeen`` and the review figures are the hub's word."""

    aid: str
    history: list[dict[str, Any]]
    card: dict[str, Any] | None = None
    last_seen: float | None = None
    online: bool = False
    review_count: int = 0
    avg_rating: float | None = None


class EntryFrame(_Outbound):
    type: Literal["entry"] = "entry"
    rid: str
    entry: DirectoryEntry
    official_list: dict[str, Any] | None = None


class ResultsFrame(_Outbound):
    type: Literal["results"] = "results"
    rid: str
    entries: list[DirectoryEntry]
    next_cursor: str | None = None
    official_list: dict[str, Any] | None = None


class OkFrame(_Outbound):
    type: Literal["ok"] = "ok"
    rid: str


class ErrorFrame(_Outbound):
    """A refusal. ``reason`` is a stable kebab-case word; ``message`` says what to do.

    ``rid`` is null for errors not tied to a request (a frame that did not parse, a closing
    connection)."""

    type: Literal["error"] = "error"
    rid: str | None = None
    reason: str
    message: str
    retry_after: float | None = None


class InstancesFrame(_Outbound):
    """The hub's instances changed (one started, or was gone for an hour): its signed
    ``anet.hub-instances`` document, sent to every node and federated hub connected."""

    type: Literal["instances"] = "instances"
    instances: dict[str, Any]


HubFrame = Annotated[
    ChallengeFrame | RegisteredFrame | AcceptedFrame | DeliverFrame | EntryFrame | ResultsFrame
    | OkFrame | ErrorFrame | InstancesFrame,
    Field(discriminator="type")]
HUB_FRAME: TypeAdapter[HubFrame] = TypeAdapter(HubFrame)


class Refusal(ReasonError):
    """One side of the hub protocol refuses the other: raised by the hub's handlers (and sent
    as an :class:`ErrorFrame`), and by a node's link when the hub's handshake fails its checks
    or the hub refused the registration (the link then tries again later)."""

    def __init__(self, reason: str, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(reason, message)
        self.retry_after = retry_after

    def frame(self, rid: str | None) -> ErrorFrame:
        return ErrorFrame(rid=rid, reason=self.reason, message=self.message,
                          retry_after=self.retry_after)
