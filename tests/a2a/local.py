"""Two real nodes (identities, stores, task layers) joined by an in-process relay
(``tests.support.fakes.FakeHub``): node ``a`` serves the local A2A endpoint; node ``b`` answers
through a module that claims its tasks (``anet_take_task``) and behaves like the TCK's scenario
agent. The a2a tests' conftest skips them all without the a2a module."""

from __future__ import annotations

import asyncio
import base64
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp

from anet_a2a.server import local_a2a
from anet_a2a.state import StateDir
from anet_core import hookimpl
from anet_core.node import Node
from anet_core.records import InboundTask, TaskClaim
from tests.support.fakes import FakeHub
from tests.support.nodes import open_node, plugins_with

FILE_BYTES = b"file content"


class ScenarioAgent:
    """The remote agent: the first word of the message picks the behaviour. ``seen`` keeps every
    task it was offered (its message and request metadata as they arrived)."""

    def __init__(self) -> None:
        self.seen: list[InboundTask] = []

    @hookimpl
    def anet_take_task(self, node: Node, task: InboundTask) -> TaskClaim | None:
        self.seen.append(task)
        if task.message["parts"][0].get("text", "").startswith("inbox"):
            return None  # nobody serves it: it waits in the operator's inbox

        async def serve(task: InboundTask, responder: Any) -> None:
            text = task.message["parts"][0].get("text", "")
            if text.startswith("message"):
                await responder.reply_message({"parts": [{"text": "a message, no task"}],
                                               "metadata": {"kept": True}})
            elif text.startswith("file"):
                await responder.working()
                await asyncio.sleep(0.3)  # lets the test's stream attach first
                await responder.artifact({"artifactId": "f1", "parts": [{
                    "raw": base64.b64encode(FILE_BYTES).decode(), "mediaType": "text/plain",
                    "filename": "notes.txt"}]})
                await responder.complete()
            elif text.startswith("ask"):
                await responder.input_required("need more")
                answer = await responder.next_message()
                await responder.complete(artifacts=[f"got: {answer['parts'][0]['text']}"])
            elif text.startswith("slow"):
                await responder.working()
                await responder.cancelled.wait()
            elif text.startswith("reject"):
                await responder.reject("not today")
            else:
                await responder.working()
                if text.startswith("preview"):
                    await asyncio.sleep(0.3)  # lets the test's stream attach first
                await responder.artifact({"artifactId": "preview-1", "parts": [{"text": "ec"}],
                                          "extensions": ["urn:anet:a2a:preview/v1"]})
                await responder.complete(artifacts=[f"echo: {text}"])

        return TaskClaim(module="scenario", serve=serve)


@dataclass
class Local:
    """Node ``a`` with its endpoint, and node ``b``'s AID."""

    node: Node
    remote: Node
    state: StateDir
    agent: ScenarioAgent

    @property
    def address(self) -> str:
        return self.state.address_file.read_text().strip()

    @property
    def token(self) -> str:
        return self.state.token_file.read_text().strip()

    @property
    def base(self) -> str:
        return f"http://{self.address}"

    def agent_url(self, aid: str | None = None) -> str:
        return f"{self.base}/a2a/v1/agents/{aid or self.remote.aid}"

    def headers(self, **extra: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token}", **extra}


@asynccontextmanager
async def two_nodes(tmp_path: Path) -> AsyncIterator[Local]:
    hub = FakeHub()
    agent = ScenarioAgent()
    async with open_node(tmp_path / "a", hub) as a, \
            open_node(tmp_path / "b", hub, plugins=plugins_with(agent)) as b:
        b.tasks.trust(a.aid)
        async with local_a2a(a):
            yield Local(node=a, remote=b, state=StateDir.of(a.paths), agent=agent)


async def rpc(http: aiohttp.ClientSession, local: Local, method: str, params: Any,
              **headers: str) -> dict[str, Any]:
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
    async with http.post(f"{local.agent_url()}/jsonrpc", json=body,
                         headers=local.headers(**headers)) as response:
        assert response.status == 200
        result: dict[str, Any] = await response.json()
        return result
