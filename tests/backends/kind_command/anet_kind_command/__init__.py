"""A third-party backend kind: ``command:///path/to/program`` runs the program with the text of
the task on stdin and answers with its standard output. It imports only anet_core.api."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from anet_core.api import BackendError, BackendKind, BackendStage, BackendTarget, hookimpl


class CommandChannel:
    def __init__(self, program: str) -> None:
        self.program = program

    async def send(self, message: dict[str, Any], metadata: dict[str, Any], *,
                   blocking: bool = False) -> AsyncIterator[dict[str, Any]]:
        text = "\n".join(part["text"] for part in message["parts"] if "text" in part)
        try:
            process = await asyncio.create_subprocess_exec(
                self.program, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE)
        except OSError as error:
            raise BackendError(BackendStage.UNREACHABLE, f"cannot run {self.program}: "
                                                         f"{error.strerror}") from None
        output, _ = await process.communicate(text.encode())
        state = "TASK_STATE_COMPLETED" if process.returncode == 0 else "TASK_STATE_FAILED"
        yield {"task": {"id": uuid.uuid4().hex, "contextId": message["contextId"],
                        "status": {"state": state},
                        "artifacts": [{"artifactId": "stdout",
                                       "parts": [{"text": output.decode()}]}]}}

    async def cancel(self, task_id: str) -> None:
        return None


@asynccontextmanager
async def open_command(target: BackendTarget) -> AsyncIterator[CommandChannel]:
    yield CommandChannel(target.url.removeprefix("command://"))


@hookimpl
def anet_backend_kinds() -> list[BackendKind]:
    return [BackendKind(name="command", schemes=("command",), open=open_command,
                        module="kind_command")]
