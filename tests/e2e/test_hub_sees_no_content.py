"""A full task through a real hub: nothing the hub stores or forwards contains its content.

The nodes reach the hub through a recording TCP proxy, so the test sees every byte the hub
receives and sends; after the task it also reads every file of the hub's data directory.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from pathlib import Path

from tests.support.fakes import CompletingModule
from tests.support.messages import user_message
from tests.support.nodes import plugins_with, running_node
from tests.support.processes import HubProcess, free_port
from tests.support.waiting import eventually

MESSAGE_SECRET = "question-7f3a9c-about-the-merger"
REPLY_SECRET = "answer-51be0d-the-merger-is-off"
ARTIFACT_SECRET = "artifact-c2e8d4-board-minutes"


@asynccontextmanager
async def recording_proxy(target_port: int, recorded: bytearray) -> AsyncIterator[int]:
    """A TCP proxy on loopback that appends every byte in both directions to ``recorded``."""

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                recorded.extend(data)
                writer.write(data)
                await writer.drain()
        except ConnectionError:
            pass
        finally:
            writer.close()

    async def connection(client_reader: asyncio.StreamReader,
                         client_writer: asyncio.StreamWriter) -> None:
        hub_reader, hub_writer = await asyncio.open_connection("127.0.0.1", target_port)
        await asyncio.gather(pipe(client_reader, hub_writer), pipe(hub_reader, client_writer))

    server = await asyncio.start_server(connection, "127.0.0.1", 0)
    try:
        yield server.sockets[0].getsockname()[1]
    finally:
        server.close()


async def test_the_hub_never_sees_the_message_the_reply_or_the_artifacts(tmp_path: Path) -> None:
    recorded = bytearray()
    hub_port = free_port()
    bob_plugins = plugins_with(CompletingModule(REPLY_SECRET, ARTIFACT_SECRET))
    async with AsyncExitStack() as stack:
        stack.callback(HubProcess(tmp_path / "hub", hub_port).start().stop)
        proxy_port = await stack.enter_async_context(recording_proxy(hub_port, recorded))
        hub_url = f"ws://127.0.0.1:{proxy_port}"
        bob = await stack.enter_async_context(
            running_node(tmp_path / "bob", bob_plugins, hub_url=hub_url))
        alice = await stack.enter_async_context(running_node(tmp_path / "alice", hub_url=hub_url))
        bob.tasks.trust(alice.aid)
        task = await alice.tasks.send(bob.aid, user_message(MESSAGE_SECRET))
        await eventually(lambda: alice.tasks.get(None, task["id"])["status"]["state"]
                         == "TASK_STATE_COMPLETED", "the task completes")
        done = alice.tasks.get(None, task["id"])

    # The task really carried the secrets end to end...
    text = json.dumps(done)
    assert REPLY_SECRET in text and ARTIFACT_SECRET in text
    assert done["metadata"]["anet.receipt_verified"] is True
    # ...and neither the wire nor the hub's files ever held one of them.
    hub_files = b"".join(path.read_bytes() for path in (tmp_path / "hub").rglob("*")
                         if path.is_file())
    assert b"envelope" in bytes(recorded) and len(hub_files) > 0
    for secret in (MESSAGE_SECRET, REPLY_SECRET, ARTIFACT_SECRET):
        assert secret.encode() not in recorded, f"{secret} crossed the hub in clear"
        assert secret.encode() not in hub_files, f"{secret} is stored at the hub"
