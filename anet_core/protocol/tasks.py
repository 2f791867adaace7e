"""The task messages nodes send each other, as the ``body`` of sealed envelopes.

Every body has a ``type``; ``docs/protocol.md`` ("Task messages") describes each one. Bodies are
validated here, at the edge, and handled as these models inside. A2A objects inside them
(messages, statuses, artifacts) are kept as the raw wire JSON the sender wrote, because the
receipt hashes exactly those bytes; they are checked with the wire models without being
re-serialised.
"""

from __future__ import annotations

import re
from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StringConstraints, TypeAdapter, field_validator

from anet_core.wire import Artifact, Message, TaskState, TaskStatus

TASK_ID_PATTERN = re.compile(r"\A[A-Za-z0-9_-]{8,64}\Z")
"""Task ids are made by the requester's node (uuid4 hex); anything else is refused."""
MAX_ID_LENGTH = 200
"""contextId and messageId come from A2A clients; bound them so keys stay small."""


class Reason(StrEnum):
    """Values of ``anet.reason``: why a task was refused, failed, or waits (docs/mcp.md,
    "Task metadata", says what each means)."""

    REJECTED_BY_POLICY = "rejected_by_policy"
    NOT_TRUSTED = "not_trusted"
    REJECTED_BY_PROVIDER = "rejected_by_provider"
    QUEUED_FOR_OPERATOR = "queued_for_operator"
    PROVIDER_FAILED = "provider_failed"
    NO_RESPONSE = "no_response"
    UNKNOWN_AGENT = "unknown_agent"
    HUB_REFUSED = "hub_refused"
    NOT_FEDERATED = "not_federated"
    HUB_STORAGE_FULL = "hub_storage_full"
    HUB_UNREACHABLE = "hub_unreachable"
    CANCELED_BY_REQUESTER = "canceled_by_requester"
    # Payments (docs/payments.md, "Reasons"): the task stays input-required with its quote.
    CLIENT_PAYLOAD_UNSUPPORTED = "client_payload_unsupported"
    OPTION_NOT_OFFERED = "option_not_offered"
    RAIL_NOT_PAYABLE = "rail_not_payable"
    NEEDS_OPERATOR_APPROVAL = "needs_operator_approval"
    PAYMENT_EXTENSION_NOT_ACTIVATED = "payment_extension_not_activated"


ReasonWord = Annotated[str, StringConstraints(pattern=r"^[a-z][a-z0-9_]{0,63}$")]
"""An ``anet.reason`` on the wire: a :class:`Reason`, or a word of the same form that a newer
peer knows and this node does not, kept and shown as it came. Only a malformed one is refused."""


ANY_SKILL = "*"
"""Where a module keys something by skill id (a backend's ``match``, a price): every skill no
other key names, and a task that names no skill."""
METADATA_PREFIX = "anet."
"""Every A2A metadata key anet writes starts with it; a client's keys with it are replaced."""


class TaskMetadata(StrEnum):
    """The ``anet.*`` keys anet writes in A2A metadata (the task's: docs/mcp.md, "Task
    metadata"; what a backend receives: docs/backends.md)."""

    STATE_SEQ = "anet.state_seq"
    """On a task (requester side): the ``stateSeq`` of the last provider update applied."""
    RECEIPT_VERIFIED = "anet.receipt_verified"
    """On a task (requester side): the provider's receipt verified and matches the result."""
    REASON = "anet.reason"
    """On a task, an update or an A2A error: why it was refused, failed or waits (a
    :class:`Reason`, or the reason of a task-layer error)."""
    EFFECT_STATUS = "anet.effect_status"
    """On a task (requester side): whether the remote agent can have acted (an
    :class:`EffectStatus`)."""
    MESSAGE_REPLY = "anet.message_reply"
    """On a task (requester side): true when the agent answered with a Message, not a Task."""
    PEER_AID = "anet.peer_aid"
    """On what the backends module forwards to a backend: the requester's AID."""
    TRUSTED = "anet.trusted"
    """On what the backends module forwards to a backend: the requester is on the trust list."""
    ORIGIN = "anet.origin"
    """On a task a module's surface handed in (``TaskLayer.local``, provider side): what that
    module said of its caller (``InboundTask.origin``), kept for a restart."""
    PUBLISH_ALIAS = "anet.publish_alias"
    """On what a backend gets for a task of the a2a module's published surface: the alias."""
    PUBLISH_TOKEN = "anet.publish_token"
    """On what a backend gets for a task of the published surface: the name of the caller's
    token (``anet publish token add <name>``)."""
    DIRECT_PEER = "anet.direct_peer"
    """On a task at a direct peer (the a2a module's local endpoint): the peer's name."""
    GATE = "anet.gate"
    """On a task (provider side): the module whose gate (``anet_task_gate``) admitted it; its
    end is offered to that module (``anet_task_ending``)."""
    GATE_REQUEST = "anet.gate_request"
    """On a task a gate held (provider side): the request metadata of its first message, handed
    on with that message once the gate admits it."""
    SKILL = "anet.skill"
    """On a client's message that opens a task (the a2a module's local endpoint): the id of the
    remote agent's skill the task is for (``TaskMessage.skill``)."""
    PEER_ERROR = "anet.peer_error"
    """On a task a direct peer's answer ended (the a2a module): the ``error`` and, for a
    JSON-RPC error, its ``code`` and A2A reason (``a2aReason``)."""


class EffectStatus(StrEnum):
    """Values of ``anet.effect_status``: can the remote side have acted on the task?"""

    NONE = "none"
    POSSIBLE = "possible"
    DONE = "done"


BODY_CONFIG = ConfigDict(extra="ignore", frozen=True, populate_by_name=True)
"""Unknown keys are ignored, so a newer peer can add fields without breaking an older one. The
body is signed and sealed by the sender, so an unknown key is the peer's own word, never an
intermediary's."""


class _Body(BaseModel):
    model_config = BODY_CONFIG

    task_id: str = Field(alias="taskId")
    context_id: str = Field(alias="contextId", min_length=1, max_length=MAX_ID_LENGTH)

    @field_validator("task_id")
    @classmethod
    def _task_id_shape(cls, value: str) -> str:
        if not TASK_ID_PATTERN.match(value):
            raise ValueError(f"taskId {value[:80]!r} is not 8-64 characters of [A-Za-z0-9_-]")
        return value


def _check_wire(model: type[BaseModel], value: dict[str, Any]) -> dict[str, Any]:
    model.model_validate(value)  # raises ValidationError naming the field
    return value


class TaskMessage(_Body):
    """Requester → provider: a message that opens a task or continues one (multi-turn)."""

    type: Literal["task.message"] = "task.message"
    message: dict[str, Any]
    skill: str | None = Field(default=None, max_length=MAX_ID_LENGTH)
    metadata: dict[str, Any] | None = None
    """The request-level ``metadata`` of the client's SendMessage (not the message's own)."""
    blocking: bool | None = None
    """True: the requester's client waits for this turn's end in one blocking call (A2A
    SendMessage without ``returnImmediately``) and sees none of its progress, so the provider
    may serve the turn without reporting progress on the way (docs/protocol.md). Left out
    otherwise."""

    @field_validator("message")
    @classmethod
    def _a2a_message(cls, value: dict[str, Any]) -> dict[str, Any]:
        _check_wire(Message, value)
        if len(str(value.get("messageId", ""))) > MAX_ID_LENGTH:
            raise ValueError(f"messageId is longer than {MAX_ID_LENGTH} characters")
        return value

    @property
    def message_id(self) -> str:
        return str(self.message["messageId"])


class TaskCancel(_Body):
    """Requester → provider: stop working on the task."""

    type: Literal["task.cancel"] = "task.cancel"


class ArtifactChunk(BaseModel):
    """One artifact event inside a non-terminal update (A2A TaskArtifactUpdateEvent fields)."""

    model_config = BODY_CONFIG

    artifact: dict[str, Any]
    append: bool = False
    last_chunk: bool = Field(default=True, alias="lastChunk")

    @field_validator("artifact")
    @classmethod
    def _a2a_artifact(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _check_wire(Artifact, value)


class TaskUpdate(_Body):
    """Provider → requester: the task's state changed, or artifacts were produced.

    ``stateSeq`` counts the provider's updates of this task from 1. A terminal update carries
    the complete final ``artifacts`` and the provider's signed ``receipt``; a non-terminal one
    carries the new artifact chunks in ``artifactChunks``.
    """

    type: Literal["task.update"] = "task.update"
    state_seq: int = Field(alias="stateSeq", ge=1)
    status: dict[str, Any]
    artifact_chunks: list[ArtifactChunk] = Field(default_factory=list, alias="artifactChunks")
    artifacts: list[dict[str, Any]] | None = None
    receipt: dict[str, Any] | None = None
    reason: ReasonWord | None = None
    message_reply: bool | None = Field(default=None, alias="messageReply")
    """Terminal ``TASK_STATE_COMPLETED`` only: the agent answered with a Message, not a Task;
    ``status.message`` is that Message."""

    @field_validator("status")
    @classmethod
    def _a2a_status(cls, value: dict[str, Any]) -> dict[str, Any]:
        return _check_wire(TaskStatus, value)

    @field_validator("artifacts")
    @classmethod
    def _a2a_artifacts(cls, value: list[dict[str, Any]] | None) -> list[dict[str, Any]] | None:
        for artifact in value or ():
            _check_wire(Artifact, artifact)
        return value

    @property
    def state(self) -> TaskState:
        return TaskState(self.status["state"])


MAX_ALIVE_TASKS = 200
"""Tasks named in one ``task.alive``; a provider with more open tasks for a peer sends several."""


class AliveTask(_Body):
    """One task of a ``task.alive``: its ids, nothing else."""


class TaskAlive(BaseModel):
    """Provider → requester: these tasks are still open here (in the inbox, or held by a
    module). A sign of life for ``no_response_after``, not a state change: no ``stateSeq``."""

    model_config = BODY_CONFIG

    type: Literal["task.alive"] = "task.alive"
    tasks: list[AliveTask] = Field(min_length=1, max_length=MAX_ALIVE_TASKS)


class CardRequest(BaseModel):
    """Requester → agent: send me your extended card (docs/payments.md, "The extended card")."""

    model_config = BODY_CONFIG

    type: Literal["card.request"] = "card.request"
    request_id: str = Field(alias="requestId", pattern=r"^[A-Za-z0-9_-]{8,64}$")


class CardReply(BaseModel):
    """Agent → requester: the extended card (a signed document), or why it is not given."""

    model_config = BODY_CONFIG

    type: Literal["card.reply"] = "card.reply"
    request_id: str = Field(alias="requestId", pattern=r"^[A-Za-z0-9_-]{8,64}$")
    card: dict[str, Any] | None = None
    refusal: str | None = Field(default=None, max_length=500)


TaskBody = Annotated[TaskMessage | TaskCancel | TaskUpdate | TaskAlive | CardRequest | CardReply,
                     Field(discriminator="type")]
TASK_BODY = TypeAdapter(TaskBody)


def wire_body(body: TaskMessage | TaskCancel | TaskUpdate | TaskAlive | CardRequest
              | CardReply) -> dict[str, Any]:
    """The JSON object sealed into an envelope (camelCase, unset optional fields left out)."""
    return body.model_dump(mode="json", by_alias=True, exclude_none=True)
