"""What the requester and provider sides share: errors, task JSON helpers, after-commit effects."""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import ValidationError

from anet_core.errors import AnetError
from anet_core.evidence import EvidenceChain, KeptRecords
from anet_core.protocol.envelope import OpenKeys, SealKeys
from anet_core.protocol.tasks import (
    MAX_ID_LENGTH,
    METADATA_PREFIX,
    EffectStatus,
    Reason,
    TaskMetadata,
)
from anet_core.store import Store
from anet_core.tasks.events import TaskEvents
from anet_core.wire import Message, Role, TaskState, format_timestamp


class TaskError(AnetError):
    """A task operation refused; ``reason`` is one of: unknown-agent, not-federated,
    not-registered, hub-unavailable, invalid-message, invalid-params, task-not-found,
    task-terminal, task-not-waiting, task-not-cancelable, policy-refused. (An AID that is none
    raises ``anet_core.identity.AidError``, reason invalid-aid.)"""


class TaskNotCancelable(TaskError):
    """A cancel refused: the task has ended (``task-not-cancelable``), or a module keeps it
    going with a reason of its own (module x402: ``payment-settled``, the payment was settled
    before the cancel; A2A's TaskNotCancelableError either way)."""


def new_id() -> str:
    return uuid.uuid4().hex


def now_stamp() -> str:
    """A status timestamp (RFC 3339, UTC) as A2A writes it."""
    return format_timestamp(datetime.now(UTC))


def parse_client_message(message: dict[str, Any]) -> Message:
    """A client's message to an agent (A2A Message wire JSON, role user), checked before anything
    is stored; :class:`TaskError` ``invalid-message`` says what is wrong."""
    try:
        parsed = Message.from_wire(message)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "message"
        raise TaskError("invalid-message", f"the message is invalid at {where}: {first['msg']}",
                        hint="see A2A 1.0 Message: messageId, role, parts") from None
    if parsed.role is not Role.ROLE_USER:
        raise TaskError("invalid-message", f"a message sent to an agent has role ROLE_USER, "
                                           f"not {parsed.role.value}")
    # The same bound as the task message that carries it (TaskMessage), checked before
    # anything is stored.
    for name, value in (("messageId", parsed.message_id), ("contextId", parsed.context_id),
                        ("taskId", parsed.task_id)):
        if len(value) > MAX_ID_LENGTH:
            raise TaskError("invalid-message", f"{name} is {len(value)} characters long; at "
                                               f"most {MAX_ID_LENGTH} are accepted",
                            hint=f"use a shorter {name} (a UUID is 36 characters)")
    return parsed


def text_message(text: str, *, role: str, context_id: str, task_id: str) -> dict[str, Any]:
    return {"messageId": new_id(), "contextId": context_id, "taskId": task_id, "role": role,
            "parts": [{"text": text}]}


def state_of(task: dict[str, Any]) -> TaskState:
    return TaskState(task["status"]["state"])


def set_status(task: dict[str, Any], state: TaskState, *,
               message: dict[str, Any] | None = None) -> dict[str, Any]:
    """Replace the task's status; a status message also joins the history."""
    status: dict[str, Any] = {"state": state.value, "timestamp": now_stamp()}
    if message is not None:
        status["message"] = message
        add_to_history(task, message)
    task["status"] = status
    return status


def add_to_history(task: dict[str, Any], message: dict[str, Any]) -> None:
    history = task.setdefault("history", [])
    if all(earlier.get("messageId") != message.get("messageId") for earlier in history):
        history.append(message)


def set_meta(task: dict[str, Any], *, reason: Reason | str | None | bool = False,
             effect: EffectStatus | None = None, state_seq: int | None = None,
             receipt_verified: bool | None = None) -> None:
    """Set the anet.* metadata keys given; ``reason=None`` removes anet.reason (a provider's
    reason this node does not know is kept as the word it is: ``ReasonWord``)."""
    metadata = task.setdefault("metadata", {})
    if reason is None:
        metadata.pop(TaskMetadata.REASON, None)
    elif reason is not False:
        metadata[TaskMetadata.REASON] = str(reason)
    if effect is not None:
        metadata[TaskMetadata.EFFECT_STATUS] = effect.value
    if state_seq is not None:
        metadata[TaskMetadata.STATE_SEQ] = state_seq
    if receipt_verified is not None:
        metadata[TaskMetadata.RECEIPT_VERIFIED] = receipt_verified


def anet_metadata(task: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in task.get("metadata", {}).items()
            if key.startswith(METADATA_PREFIX)}


def status_event(task: dict[str, Any]) -> dict[str, Any]:
    """A2A StreamResponse ``statusUpdate`` for the task's current status, with anet.* metadata."""
    return {"statusUpdate": {"taskId": task["id"], "contextId": task["contextId"],
                             "status": task["status"], "metadata": anet_metadata(task)}}


def artifact_event(task: dict[str, Any], artifact: dict[str, Any], *, append: bool,
                   last_chunk: bool) -> dict[str, Any]:
    event: dict[str, Any] = {"taskId": task["id"], "contextId": task["contextId"],
                             "artifact": artifact}
    if append:
        event["append"] = True
    if last_chunk:
        event["lastChunk"] = True
    return {"artifactUpdate": event}


def apply_artifact(task: dict[str, Any], artifact: dict[str, Any], *, append: bool) -> None:
    """Add an artifact, replace the one with its id, or (``append``) extend that one's parts."""
    artifacts = task.setdefault("artifacts", [])
    for index, existing in enumerate(artifacts):
        if existing["artifactId"] == artifact["artifactId"]:
            if append:
                artifacts[index] = existing | {"parts": existing["parts"] + artifact["parts"]}
            else:
                artifacts[index] = artifact
            return
    artifacts.append(artifact)


@dataclass
class Effects:
    """What to do once a transaction committed: evidence records, events, background work."""

    evidence: list[tuple[str, dict[str, Any]]] = field(default_factory=list)
    kept: list[KeptRecords] = field(default_factory=list)
    """Records already in the journal, in the transaction that made them (:meth:`Services.keep`)."""
    events: list[tuple[dict[str, Any], list[dict[str, Any]]]] = field(default_factory=list)
    """Each task, and the events that left it so (:meth:`TaskEvents.publish`)."""
    background: list[Callable[[], Awaitable[None]]] = field(default_factory=list)
    send: bool = False
    redelivered_if_lost: bool = False
    """The transaction applies an envelope that its sender (or the hub) keeps until this node
    acknowledges it, which it does only after a flush: a crash of the machine that takes the
    commit brings the envelope again, and it tells the same. Its events need not wait for the
    disk (docs/performance.md, "Durability")."""

    def record(self, kind: str, **data: Any) -> None:
        self.evidence.append((kind, data))

    def publish(self, task: dict[str, Any], events: list[dict[str, Any]]) -> None:
        self.events.append((task, events))


@dataclass
class Services:
    """What the parts of the task layer share once the layer runs."""

    events: TaskEvents
    evidence: EvidenceChain
    store: Store
    wake_outbox: Callable[[], None]
    start_background: Callable[[Callable[[], Awaitable[None]]], None]
    seal_keys: SealKeys = field(default_factory=SealKeys)
    """The ephemeral keys the node's seals use, one per recipient key at a time."""
    open_keys: OpenKeys = field(default_factory=OpenKeys)
    """The keys derived for the ``epk`` of envelopes opened, kept for the next ones."""

    def keep(self, effects: Effects) -> None:
        """Keep the records of ``effects`` in the evidence journal inside the transaction that
        makes the change they record; call it last in that transaction, and :meth:`run` the
        effects right after it commits (``EvidenceChain.keep`` says why). A record kept in a
        commit of its own, after the change's, could be lost to a crash of the machine that
        keeps the change (docs/performance.md, "Durability")."""
        if effects.evidence:
            effects.kept.append(self.evidence.keep(effects.evidence))
            effects.evidence = []

    async def run(self, effects: Effects) -> None:
        """Carry out the effects of a committed transaction, in this order, once it is on disk.

        The task layer commits without waiting for the disk (``durable=False``); this is where
        it waits (one fsync covers every transaction committed before it, and the evidence
        records the journal keeps: kept in the transaction, :meth:`keep`, or else journaled
        here), before anyone is told: the caller (who may answer an A2A client), a subscriber,
        a backend; the outbox flushes again before it hands anything to the hub. The one
        exception: the events of a transaction that is ``redelivered_if_lost`` go first, and
        the flush before the envelope's acknowledgement makes it durable. Nothing here yields
        to the loop, so a module's progress reports still reach the outbox together with the
        end that follows them (see ``Outbox.flush``). The records are appended to the chain a
        moment later (``APPEND_AFTER_S`` in evidence/chain.py); an append that fails is
        logged."""
        if not (effects.events or effects.send or effects.background or effects.evidence
                or effects.kept):
            return
        self.keep(effects)  # records made outside a transaction: journaled now, together
        for kept in effects.kept:
            self.evidence.queue(kept)
        if effects.redelivered_if_lost:
            self._publish(effects)
            if not (effects.send or effects.background):
                return  # durable with the flush before the envelope's acknowledgement
        await self.store.flush()
        if effects.send:
            self.wake_outbox()
        if not effects.redelivered_if_lost:
            self._publish(effects)
        for work in effects.background:
            self.start_background(work)

    def _publish(self, effects: Effects) -> None:
        for task, events in effects.events:
            self.events.publish(task, events)
