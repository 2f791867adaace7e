"""Messages, parts, artifacts, tasks and the events of a task (A2A 1.0, ``lf.a2a.v1``)."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, JsonValue, field_validator, model_validator

from anet_core.wire._base import Base64Bytes, JsonObject, Timestamp, WireModel, exactly_one
from anet_core.wire.enums import Role, TaskState

PartKind = Literal["text", "raw", "url", "data"]


class Part(WireModel):
    """One piece of content: exactly one of ``text``, ``raw``, ``url``, ``data`` (oneof content).

    ``data`` is any JSON value (``google.protobuf.Value``), kept as plain JSON. A part written
    as ``{"data": null}`` is a data part holding JSON null, which is why presence of ``data`` is
    read from the fields that were set rather than from ``None``.
    """

    text: str | None = None
    raw: Base64Bytes | None = None
    url: str | None = None
    data: JsonValue = None
    metadata: JsonObject | None = None
    filename: str = ""
    media_type: str = ""

    @model_validator(mode="after")
    def _one_content(self) -> Part:
        present = [name for name in ("text", "raw", "url") if getattr(self, name) is not None]
        if "data" in self.model_fields_set:
            present.append("data")
        if len(present) != 1:
            got = " and ".join(present) if present else "none"
            raise ValueError(f"a part needs exactly one of text, raw, url, data; got {got}")
        return self

    @property
    def kind(self) -> PartKind:
        """Which content member this part carries."""
        for name in ("text", "raw", "url"):
            if getattr(self, name) is not None:
                return name
        return "data"

    def wire(self) -> dict[str, Any]:
        out = super().wire()
        if self.kind == "data" and "data" not in out:
            out["data"] = None  # JSON null is a set Value, not an absent one
        return out


class Message(WireModel):
    """One turn of a conversation, from the user or from the agent."""

    message_id: str = Field(min_length=1)
    context_id: str = ""
    task_id: str = ""
    role: Role
    parts: list[Part] = Field(min_length=1)
    metadata: JsonObject | None = None
    extensions: list[str] = Field(default_factory=list)
    reference_task_ids: list[str] = Field(default_factory=list)

    @field_validator("role")
    @classmethod
    def _role_given(cls, role: Role) -> Role:
        if role is Role.ROLE_UNSPECIFIED:
            raise ValueError("role must be ROLE_USER or ROLE_AGENT")
        return role


class Artifact(WireModel):
    """An output of a task, made of parts; ``artifactId`` is unique within the task."""

    artifact_id: str = Field(min_length=1)
    name: str = ""
    description: str = ""
    parts: list[Part] = Field(min_length=1)
    metadata: JsonObject | None = None
    extensions: list[str] = Field(default_factory=list)


class TaskStatus(WireModel):
    """The state of a task, with the agent's status message and when it was reached."""

    state: TaskState
    message: Message | None = None
    timestamp: Timestamp | None = None


class Task(WireModel):
    """A unit of work; ``id`` is always made by the server."""

    id: str = Field(min_length=1)
    context_id: str = ""
    status: TaskStatus
    artifacts: list[Artifact] = Field(default_factory=list)
    history: list[Message] = Field(default_factory=list)
    metadata: JsonObject | None = None


class TaskStatusUpdateEvent(WireModel):
    """A stream event: the task's status changed (1.0 has no ``final``; the stream closing ends
    it)."""

    task_id: str = Field(min_length=1)
    context_id: str = Field(min_length=1)
    status: TaskStatus
    metadata: JsonObject | None = None


class TaskArtifactUpdateEvent(WireModel):
    """A stream event: an artifact, or with ``append`` more parts of one already sent."""

    task_id: str = Field(min_length=1)
    context_id: str = Field(min_length=1)
    artifact: Artifact
    append: bool = False
    last_chunk: bool = False
    metadata: JsonObject | None = None


class SendMessageResponse(WireModel):
    """Result of SendMessage: ``{"task": ...}`` or ``{"message": ...}`` (oneof payload)."""

    task: Task | None = None
    message: Message | None = None

    @model_validator(mode="after")
    def _one_payload(self) -> SendMessageResponse:
        exactly_one(self, ("task", "message"), "payload")
        return self

    @property
    def payload(self) -> Task | Message:
        """The task or the message, whichever was sent."""
        return self.task if self.task is not None else self.message  # type: ignore[return-value]


StreamEvent = Task | Message | TaskStatusUpdateEvent | TaskArtifactUpdateEvent
StreamKind = Literal["task", "message", "statusUpdate", "artifactUpdate"]

_STREAM_MEMBERS = ("task", "message", "status_update", "artifact_update")


class StreamResponse(WireModel):
    """One event of a stream or a push notification (oneof payload with four members)."""

    task: Task | None = None
    message: Message | None = None
    status_update: TaskStatusUpdateEvent | None = None
    artifact_update: TaskArtifactUpdateEvent | None = None

    @model_validator(mode="after")
    def _one_payload(self) -> StreamResponse:
        exactly_one(self, _STREAM_MEMBERS, "payload")
        return self

    @classmethod
    def of(cls, event: StreamEvent) -> StreamResponse:
        """Wrap an event under the member key its type calls for."""
        if isinstance(event, Task):
            return cls(task=event)
        if isinstance(event, Message):
            return cls(message=event)
        if isinstance(event, TaskStatusUpdateEvent):
            return cls(status_update=event)
        if isinstance(event, TaskArtifactUpdateEvent):
            return cls(artifact_update=event)
        raise TypeError(f"not a stream event: {type(event).__name__}")

    @property
    def kind(self) -> StreamKind:
        """The wire key of the member that is set."""
        name = exactly_one(self, _STREAM_MEMBERS, "payload")
        return type(self).model_fields[name].alias  # type: ignore[return-value]

    @property
    def payload(self) -> StreamEvent:
        """The event itself, whichever member carries it."""
        return getattr(self, exactly_one(self, _STREAM_MEMBERS, "payload"))  # type: ignore[no-any-return]
