"""The signed documents of the directory: network cards, receipts, reviews, the official list.

Each is a signed document (``anet_core.identity.documents``); the models here check the content
once the signature is known good. Hub and node use the same checks, so what a hub accepts is
exactly what a node will verify.
"""

from __future__ import annotations

import hashlib
import time
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, ValidationError

from anet_core.errors import ReasonError
from anet_core.identity import (
    DocumentError,
    Identity,
    VerifiedHistory,
    sign_document,
    verify_document,
)
from anet_core.protocol.fields import Aid
from anet_core.util.canonical import b64u

CARD_TYPE = "anet.card"
RECEIPT_TYPE = "anet.receipt/v1"
"""As the provider's task layer issues them (``anet_core.tasks.receipts``)."""
REVIEW_TYPE = "anet.review"
OFFICIAL_LIST_TYPE = "anet.official-list"
HUB_INSTANCES_TYPE = "anet.hub-instances"
MAX_HUB_INSTANCES = 16
"""The most instance URLs a hub advertises, and a node follows."""
EXTENDED_CARD_TYPE = "anet.extended-card/v1"
COMPLETED = "TASK_STATE_COMPLETED"

MAX_CARD_BYTES = 64 * 1024
MAX_REVIEW_TEXT = 2000

_Word = Annotated[str, StringConstraints(min_length=1, max_length=100)]


class SignedContent(BaseModel):
    """The content of a signed document once its signature is known good."""

    # Documents are signed by their authors: fields this version does not know are kept (they
    # are covered by the signature) rather than refused, so authors may add fields.
    model_config = ConfigDict(extra="allow", frozen=True)


class CardSkill(BaseModel):
    model_config = ConfigDict(extra="allow", frozen=True)

    id: _Word
    name: Annotated[str, StringConstraints(max_length=200)] = ""
    description: Annotated[str, StringConstraints(max_length=2000)] = ""
    tags: list[Annotated[str, StringConstraints(min_length=1, max_length=64)]] = Field(
        default_factory=list, max_length=32)


class NetworkCard(SignedContent):
    """What an agent says about itself, signed with its current key (``keySeq`` names it)."""

    type: Literal["anet.card"]
    name: Annotated[str, StringConstraints(max_length=200)]
    description: Annotated[str, StringConstraints(max_length=4000)] = ""
    skills: list[CardSkill] = Field(default_factory=list, max_length=64)
    charge: Literal["free", "partial", "paid"] = "free"
    homeHub: Annotated[str, StringConstraints(max_length=2048)]
    publishedAt: int = Field(ge=0)


class ExtendedCard(SignedContent):
    """What an agent tells one requester beyond its network card: the prices of its skills
    (skill id → ``{"amount", "asset", "networks"}``), signed for that ``requester``."""

    type: Literal["anet.extended-card/v1"]
    agent: Aid
    requester: Aid
    prices: dict[_Word, dict[str, Any]] = Field(default_factory=dict, max_length=64)
    issuedAt: int = Field(ge=0)


class Receipt(SignedContent):
    """A provider's signed statement that a task it served reached a final state (the fields a
    review depends on; ``contextId``, ``stateSeq`` and ``issuedAt`` are kept as signed)."""

    type: Literal["anet.receipt/v1"]
    taskId: _Word
    requester: Aid
    provider: Aid
    state: str
    resultHash: Annotated[str, StringConstraints(min_length=1, max_length=200)]


class Review(SignedContent):
    type: Literal["anet.review"]
    subject: Aid
    rating: int = Field(ge=1, le=5)
    text: Annotated[str, StringConstraints(max_length=MAX_REVIEW_TEXT)] = ""
    receipt: dict[str, Any]
    createdAt: int = Field(ge=0)


class OfficialList(SignedContent):
    type: Literal["anet.official-list"]
    hub: Aid
    version: int = Field(ge=1)
    issuedAt: int = Field(ge=0)
    members: list[Aid] = Field(max_length=100_000)


class HubInstances(SignedContent):
    """The URLs at which a hub's instances take nodes, signed with the hub's key: its nodes
    and federated hubs fail over to them (docs/protocol.md, "Hub instances")."""

    type: Literal["anet.hub-instances"]
    hub: Aid
    urls: list[Annotated[str, StringConstraints(min_length=1, max_length=2048)]] = Field(
        max_length=MAX_HUB_INSTANCES)
    issuedAt: int = Field(ge=0)


HubDoc = TypeVar("HubDoc", OfficialList, HubInstances)


class DirectoryDocError(ReasonError, ValueError):
    """A document the directory refuses. ``reason`` is kebab-case; the message says why."""


def checked_content(model: type[BaseModel], doc: object, history: VerifiedHistory, *, what: str,
                    current_key: bool) -> Any:
    """``doc``'s content as ``model`` when ``history`` signed it (``what`` prefixes the reason of
    a refusal: ``card-bad-signature``, ``card-invalid``)."""
    try:
        content = verify_document(doc, history, require_current_key=current_key)
    except DocumentError as error:
        raise DirectoryDocError(f"{what}-{error.reason}", f"the {what} does not verify: "
                                                          f"{error}") from None
    try:
        return model.model_validate(content)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(map(str, first["loc"])) or "(top)"
        raise DirectoryDocError(f"{what}-invalid", f"the {what} is invalid at {where}: "
                                                   f"{first['msg']}") from None


def verify_card(card: object, history: VerifiedHistory) -> NetworkCard:
    """The card's content when it is signed by ``history``'s current key and well-formed."""
    return checked_content(NetworkCard, card, history, what="card", current_key=True)


def verify_official_list(doc: object, hub_history: VerifiedHistory) -> OfficialList:
    return _hub_document(OfficialList, doc, hub_history, what="official-list")


def verify_hub_instances(doc: object, hub_history: VerifiedHistory) -> HubInstances:
    return _hub_document(HubInstances, doc, hub_history, what="hub-instances")


def _hub_document(model: type[HubDoc], doc: object, hub_history: VerifiedHistory, *,
                  what: str) -> HubDoc:
    """A document the hub signed about itself: by its key, naming it."""
    checked: HubDoc = checked_content(model, doc, hub_history, what=what, current_key=False)
    if checked.hub != hub_history.aid:
        raise DirectoryDocError(f"{what}-wrong-hub", f"the {what} document names hub "
                                                     f"{checked.hub}, not {hub_history.aid}")
    return checked


def verify_review(review: object, *, reviewer: VerifiedHistory,
                  subject: VerifiedHistory) -> tuple[Review, Receipt]:
    """Check a review and the receipt that entitles it (see docs/protocol.md, "Reviews")."""
    checked = checked_content(Review, review, reviewer, what="review", current_key=False)
    if checked.subject != subject.aid:
        raise DirectoryDocError("review-wrong-subject",
                                f"the review is about {checked.subject}, not {subject.aid}")
    if reviewer.aid == subject.aid:
        raise DirectoryDocError("review-self", "an agent cannot review itself")
    receipt = checked_content(Receipt, checked.receipt, subject, what="receipt", current_key=False)
    if receipt.provider != subject.aid or receipt.requester != reviewer.aid:
        raise DirectoryDocError(
            "receipt-wrong-parties",
            f"the receipt is for a task that {receipt.requester} asked of {receipt.provider}; a "
            f"review by {reviewer.aid} of {subject.aid} needs a receipt naming them")
    if receipt.state != COMPLETED:
        raise DirectoryDocError("receipt-not-completed",
                                f"the receipt's task state is {receipt.state}, not {COMPLETED}")
    return checked, receipt


def receipt_key(receipt: Receipt) -> str:
    """One review per receipt: the provider and its task id name the receipt, so a provider who
    signs two receipts for one task does not earn two reviews."""
    digest = hashlib.sha256(f"{receipt.provider}\x00{receipt.taskId}".encode()).digest()
    return b64u(digest)


def sign_hub_instances(hub: Identity, urls: list[str]) -> dict[str, Any]:
    """The hub's signed list of its instances' URLs, as given (the first ``MAX_HUB_INSTANCES``)."""
    return sign_document(hub, {"type": HUB_INSTANCES_TYPE, "hub": hub.aid,
                               "urls": urls[:MAX_HUB_INSTANCES], "issuedAt": int(time.time())})


def sign_official_list(operator: Identity, members: list[str], *, version: int) -> dict[str, Any]:
    """The hub operator's signed list of official agents (sorted, without repeats)."""
    return sign_document(operator, {"type": OFFICIAL_LIST_TYPE, "hub": operator.aid,
                                    "version": version, "issuedAt": int(time.time()),
                                    "members": sorted(set(members))})
