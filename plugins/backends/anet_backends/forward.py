"""Forwarding one requester task to one backend: turns, retries, cancel and evidence.

The rules (docs/backends.md, "The forwarding rules"): a forward that failed before the
backend could have taken the message is retried with backoff; once it was written only a busy
answer (503) is, because a repeated message could run the requester's task twice. The mapping
requester task → backend task lives in memory only; after a restart a follow-up message starts
a new backend task in the same context (the requester's contextId is the backend's contextId).

Events that arrive together are reported together (arrivals.py): progress without a note
(WORKING, artifacts) waits up to :data:`TOGETHER_S` for what follows, and when the turn's
completion follows it goes with the completion, one report instead of one per event. The
requester would not have seen it apart anyway: its outbox entries would be superseded by the
terminal update (anet_core/tasks/outbox.py), which says all they said.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from contextlib import aclosing, suppress
from dataclasses import dataclass, field
from typing import Any, NoReturn

from anet_backends.arrivals import Arrivals, Progress, folded
from anet_backends.retry import RetryPlan
from anet_core.api import (
    METADATA_PREFIX,
    BackendError,
    BackendKind,
    BackendOpener,
    BackendStage,
    BackendTarget,
    InboundTask,
    Responder,
    TaskMetadata,
)
from anet_core.wire import TaskState

log = logging.getLogger(__name__)

WORKING_NOTICE_AFTER_S = 60.0
"""A first turn the backend has held this long without an answer is announced as working."""
TOGETHER_S = 0.005
"""Progress without a note waits this long for what follows it: a backend that answers at once
sends its whole turn within it, and the completion then carries the progress."""
FORWARDED = "backends.forwarded"
FAILED = "backends.failed"

ASKS_FOR_INPUT = "The agent needs more input."
"""Shown to the requester when the backend asks for input without a message."""

WireObject = dict[str, Any]
"""A2A wire JSON, passed on as the backend or the requester wrote it."""

# What the requester is told when a forward fails (anet.reason provider_failed): a neutral
# sentence per kind of failure. The detail (socket paths, HTTP statuses, errors) describes
# this machine: it goes to the log and to the backends.failed record only.
TOLD_BY_STAGE = {
    BackendStage.UNREACHABLE: "the agent's backend could not be reached",
    BackendStage.BUSY: "the agent's backend stayed busy",
    BackendStage.WRITTEN: "the agent's backend failed on this task",
}
TOLD_SILENT = "the agent's backend did not answer in time"
TOLD_CRASHED = "the agent failed on this task"
TOLD_NO_ANSWER = "the agent's backend ended its turn without an answer"

Count = Callable[[str, str], None]
"""Counts an evidence record of a kind (FORWARDED, FAILED) for a backend (its match) in the
node's metrics."""


@dataclass
class BackendTask:
    """Where a requester task lives on the backend; ``task_id`` is None until it answered."""

    context_id: str
    task_id: str | None = None
    artifacts_sent: set[str] = field(default_factory=set)
    """A blocking answer repeats every artifact of the task; each reaches the requester once."""


@dataclass
class Turn:
    """What one forwarded message brought back."""

    state: TaskState | None = None
    message: WireObject | None = None
    answered: bool = False
    message_reply: bool = False
    """The backend answered with a Message, not a Task."""
    progress: list[Progress] = field(default_factory=list)
    """Progress not reported yet: it waits for the events that follow it at once."""

    @property
    def ending(self) -> bool:
        """The backend's last status ends the turn: the stream is about to end."""
        return self.state is not None and (self.state.is_terminal or self.state.is_interrupted)


class Ended(Exception):
    """The task ended (answered, failed, canceled or left in the inbox): no further turns."""


def _with_node_metadata(metadata: dict[str, Any], task: InboundTask) -> dict[str, Any]:
    """``metadata`` as the backend gets it: the requester's keys, except ``anet.*`` ones (a
    requester cannot set those), and the node's own word on who asks (docs/backends.md): the
    peer, whether it is trusted, and for a task a local surface handed in what that surface
    says of its caller (``InboundTask.origin``)."""
    return {**{key: value for key, value in metadata.items()
               if not key.startswith(METADATA_PREFIX)},
            TaskMetadata.PEER_AID: task.peer_aid, TaskMetadata.TRUSTED: task.trusted,
            **(task.origin or {})}


class Forwarder:
    """Serves the tasks that one configured backend takes."""

    def __init__(self, target: BackendTarget, kind: BackendKind, retry: RetryPlan,
                 count: Count, *, idle_timeout_s: float, tasks: dict[str, BackendTask],
                 open: BackendOpener | None = None) -> None:
        self.target = target
        self.kind = kind
        self.open = open or kind.open
        """How the forwards reach the backend: the kind's, or what its ``pooled`` yielded."""
        self.retry = retry
        self.count = count
        self.idle_timeout_s = idle_timeout_s
        self.tasks = tasks

    async def skills(self) -> list[dict[str, Any]]:
        """The backend's skills for the node's card; none when the kind cannot tell or the
        backend cannot be read now (its checks run first, as for a task)."""
        if self.kind.skills is None:
            return []
        try:
            return await self.kind.skills(self.target)
        except BackendError as error:
            log.info("event=backend-skills-skipped backend=%s reason=%r", self.target.match,
                     error.reason)
            return []

    async def serve(self, task: InboundTask, responder: Responder) -> None:
        """Forward the task and each follow-up message until it ends or is canceled."""
        mapped = self.tasks.setdefault(task.task_id, BackendTask(context_id=task.context_id))
        work = asyncio.ensure_future(self._turns(task, responder, mapped))
        canceled = asyncio.ensure_future(responder.cancelled.wait())
        try:
            await asyncio.wait({work, canceled}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            # A daemon shutdown cancels serve(): the backend task is left running, unmapped.
            for waiter in (work, canceled):
                waiter.cancel()
            with suppress(asyncio.CancelledError):
                await work
        try:
            if not work.cancelled() and work.exception() is None:
                return
            if canceled.done() and not canceled.cancelled():
                await self._cancel(task, mapped)
                return
            raise work.exception()  # type: ignore[misc]
        finally:
            self.tasks.pop(task.task_id, None)

    async def _turns(self, task: InboundTask, responder: Responder, mapped: BackendTask) -> None:
        message: WireObject = task.message
        first = mapped.task_id is None
        try:
            while True:
                message = await self._turn(task, responder, mapped, message, first)
                first = False
        except Ended:
            return
        except Exception as error:
            # Whatever ends the forward, the requester and the evidence chain learn of it.
            log.exception("event=backend-forward-failed backend=%s task=%s", self.target.match,
                          task.task_id)
            with suppress(Ended):
                await self._failed(task, responder, mapped, message,
                                   f"{type(error).__name__}: {error}", None, TOLD_CRASHED)

    async def _announce(self, responder: Responder) -> None:
        await asyncio.sleep(WORKING_NOTICE_AFTER_S)
        await responder.working()

    async def _turn(self, task: InboundTask, responder: Responder, mapped: BackendTask,
                    message: WireObject, first: bool) -> WireObject:
        """Forward one message (with retries); return the requester's next message."""
        outgoing = self._outgoing(task, mapped, message)
        # The request-level metadata the requester's client sent with this message.
        metadata = _with_node_metadata(responder.request_metadata, task)
        loop = asyncio.get_running_loop()
        started, attempts = loop.time(), 0
        turn = Turn()
        while True:
            attempts += 1
            try:
                await self._attempt(task, responder, mapped, outgoing, metadata, turn, first)
                break
            except BackendError as error:
                if error.stage is BackendStage.REFUSED:
                    log.warning("event=backend-refused backend=%s task=%s reason=%r",
                                self.target.match, task.task_id, error.reason)
                    await responder.to_inbox(f"backend {self.target.match} refused: "
                                             f"{error.reason}")
                    raise Ended from None
                retryable = error.stage in {BackendStage.UNREACHABLE, BackendStage.BUSY}
                wait = self.retry.delay(attempts, loop.time() - started) if retryable else None
                if wait is None:
                    await self._failed(task, responder, mapped, message, error.reason, attempts,
                                       TOLD_BY_STAGE.get(error.stage, TOLD_CRASHED))
                log.info("event=backend-retry backend=%s task=%s attempt=%d reason=%r retryIn=%gs",
                         self.target.match, task.task_id, attempts, error.reason, wait)
                await asyncio.sleep(wait)
            except TimeoutError:
                await self._failed(task, responder, mapped, message,
                                   f"the backend sent nothing for {self.idle_timeout_s:g} s",
                                   attempts, TOLD_SILENT)
            except Exception as error:
                log.exception("event=backend-crashed backend=%s task=%s", self.target.match,
                              task.task_id)
                await self._failed(task, responder, mapped, message,
                                   f"{type(error).__name__}: {error}", attempts, TOLD_CRASHED)
        return await self._end_of_turn(task, responder, mapped, message, turn)

    def _outgoing(self, task: InboundTask, mapped: BackendTask, message: WireObject) -> WireObject:
        """The requester's message as the backend gets it: messageId and parts unchanged, ids
        of the backend's task, and no ``anet.*`` metadata but the node's own."""
        outgoing = {key: value for key, value in message.items()
                    if key not in {"taskId", "contextId", "metadata"}}
        outgoing["contextId"] = mapped.context_id
        if mapped.task_id is not None:
            outgoing["taskId"] = mapped.task_id
        outgoing["metadata"] = _with_node_metadata(message.get("metadata") or {}, task)
        return outgoing

    async def _attempt(self, task: InboundTask, responder: Responder, mapped: BackendTask,
                       outgoing: WireObject, metadata: dict[str, Any], turn: Turn,
                       first: bool) -> None:
        loop = asyncio.get_running_loop()
        async with (self.open(self.target) as channel,
                    aclosing(channel.send(outgoing, metadata,
                                          blocking=responder.blocking)) as sent,
                    Arrivals(sent) as arrivals):
            # The backend has the message from here on; the working notice counts from now.
            notice = asyncio.ensure_future(self._announce(responder)) if first else None
            held_until: float | None = None  # when progress waiting for what follows is sent
            try:
                while True:
                    try:
                        batch = await arrivals.next(self.idle_timeout_s if held_until is None
                                                    else max(0.0, held_until - loop.time()))
                    except TimeoutError:
                        if held_until is None:
                            raise  # the backend fell silent
                        await self._report_progress(responder, turn)
                        held_until = None
                        continue
                    if batch is None:
                        return
                    if notice is not None:
                        notice.cancel()
                    if not turn.answered:
                        turn.answered = True
                        self._forwarded(task, responder, mapped, outgoing, batch[0])
                    for event in batch:
                        self._event(mapped, turn, event)
                    if turn.ending or not turn.progress:
                        continue  # the end carries the progress, or there is none
                    if all(event.bare for event in turn.progress):
                        held_until = held_until or loop.time() + TOGETHER_S
                    else:
                        await self._report_progress(responder, turn)
                        held_until = None
            except Exception:
                # What arrived before the failure reaches the requester, as it did when each
                # event was reported at once; the failure is handled by the caller.
                await self._report_progress(responder, turn)
                raise
            finally:
                if notice is not None:
                    notice.cancel()

    @staticmethod
    def _event(mapped: BackendTask, turn: Turn, event: WireObject) -> None:
        if "message" in event:
            turn.state, turn.message = TaskState.TASK_STATE_COMPLETED, event["message"]
            turn.message_reply = True
            return
        if "task" in event:
            body = event["task"]
            mapped.task_id = body["id"]
            mapped.context_id = body.get("contextId") or mapped.context_id
            for artifact in body.get("artifacts", []):
                if artifact["artifactId"] not in mapped.artifacts_sent:
                    mapped.artifacts_sent.add(artifact["artifactId"])
                    turn.progress.append(Progress(artifact))
            Forwarder._status(turn, body["status"])
        elif "statusUpdate" in event:
            update = event["statusUpdate"]
            mapped.task_id = update["taskId"]
            Forwarder._status(turn, update["status"])
            if turn.state is TaskState.TASK_STATE_WORKING:
                turn.progress.append(Progress(message=turn.message))
        elif "artifactUpdate" in event:
            update = event["artifactUpdate"]
            mapped.task_id = update["taskId"]
            mapped.artifacts_sent.add(update["artifact"]["artifactId"])
            turn.progress.append(Progress(update["artifact"], append=update.get("append", False),
                                          last_chunk=update.get("lastChunk", False)))

    @staticmethod
    async def _report_progress(responder: Responder, turn: Turn) -> None:
        progress, turn.progress = turn.progress, []
        for event in progress:
            if event.artifact is None:
                await responder.working(event.message)
            else:
                await responder.artifact(event.artifact, append=event.append,
                                         last_chunk=event.last_chunk)

    @staticmethod
    def _status(turn: Turn, status: WireObject) -> None:
        turn.state = TaskState(status["state"])
        turn.message = status.get("message")

    async def _end_of_turn(self, task: InboundTask, responder: Responder, mapped: BackendTask,
                           message: WireObject, turn: Turn) -> WireObject:
        state = turn.state
        artifacts = folded(turn.progress) if state is TaskState.TASK_STATE_COMPLETED \
            and not turn.message_reply else None
        if artifacts is None:
            await self._report_progress(responder, turn)
        if state is TaskState.TASK_STATE_COMPLETED and turn.message_reply:
            await responder.reply_message(turn.message or {})
        elif state is TaskState.TASK_STATE_COMPLETED:
            await responder.complete(turn.message, artifacts or ())
        elif state in {TaskState.TASK_STATE_FAILED, TaskState.TASK_STATE_REJECTED}:
            await responder.fail(f"the backend ended the task as {state.name}", turn.message)
        elif state is TaskState.TASK_STATE_CANCELED:
            await responder.fail("the backend canceled the task", turn.message)
        elif state is not None and state.is_interrupted:
            await responder.input_required(turn.message or ASKS_FOR_INPUT)
            return await responder.next_message()
        else:
            await self._failed(task, responder, mapped, message,
                               f"the backend ended the turn in state "
                               f"{state.name if state else 'none'} without an answer", 1,
                               TOLD_NO_ANSWER)
        raise Ended

    def _record(self, responder: Responder, kind: str, data: dict[str, Any]) -> None:
        """Into the evidence chain with the change the responder's next call makes (the
        answer's update, the failure): one commit for both (Responder.record)."""
        responder.record(kind, {"backend": self.target.match, "kind": self.kind.name, **data})
        self.count(kind, self.target.match)

    def _forwarded(self, task: InboundTask, responder: Responder, mapped: BackendTask,
                   outgoing: WireObject, event: WireObject) -> None:
        body = event.get("task") or event.get("statusUpdate") or event.get("artifactUpdate") or {}
        backend_task = body.get("id") or body.get("taskId") or mapped.task_id
        self._record(responder, FORWARDED, {
            "taskId": task.task_id, "peer": task.peer_aid, "messageId": outgoing.get("messageId"),
            "backendTaskId": backend_task, "contextId": mapped.context_id})

    async def _failed(self, task: InboundTask, responder: Responder, mapped: BackendTask,
                      message: WireObject, reason: str, attempts: int | None,
                      told: str) -> NoReturn:
        log.warning("event=backend-failed backend=%s task=%s attempts=%s reason=%r",
                    self.target.match, task.task_id, "?" if attempts is None else attempts,
                    reason)
        self._record(responder, FAILED, {
            "taskId": task.task_id, "peer": task.peer_aid, "messageId": message.get("messageId"),
            "backendTaskId": mapped.task_id, "attempts": attempts, "reason": reason})
        await responder.fail(told)
        raise Ended

    async def _cancel(self, task: InboundTask, mapped: BackendTask) -> None:
        """The requester canceled (the task layer already ended the task): cancel the backend
        task too, so that the backend stops working on it."""
        if mapped.task_id is not None:
            try:
                async with self.open(self.target) as channel:
                    await asyncio.wait_for(channel.cancel(mapped.task_id), self.idle_timeout_s)
            except (BackendError, TimeoutError) as error:
                log.warning("event=backend-cancel-failed backend=%s backendTask=%s task=%s "
                            "error=%r", self.target.match, mapped.task_id, task.task_id, error)
