"""A cancel racing a paid task's work at a real backend: bob serves the priced skill with module
backends, forwarding to the official a2a-sdk server (tests/support/sdk_backend) through a
:class:`~tests.x402.holding_proxy.BackendProxy` that holds the forward before the backend saw it
or after the backend answered. The hub is a real ``anet hub serve`` process; alice (every module,
the automatic tier) pays. Each test ends with :func:`tests.support.outcomes.assert_one_outcome`.
"""

from __future__ import annotations

import asyncio
import shutil
import uuid
from collections.abc import AsyncIterator, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from anet_core.node import Node
from anet_x402 import plugin as x402_plugin
from tests.support.messages import user_message
from tests.support.nodes import plugins_with, prepare
from tests.support.outcomes import assert_one_outcome, state_of
from tests.support.processes import HubProcess, free_port
from tests.support.waiting import eventually
from tests.x402.holding_proxy import BackendProxy, Moment, RailProxy
from tests.x402.payee import bob_and_credited_alice

backends_plugin = pytest.importorskip("anet_backends.plugin")
sdk = pytest.importorskip("tests.support.sdk_backend")

pytestmark = pytest.mark.timeout(120)

SKILL = "summarize"
PRICES = {SKILL: {"amount": "0.05"}}
TIERS = {"auto_max": {"USD": "0.10"}}
CANCELED = "TASK_STATE_CANCELED"


@pytest.fixture
def sockets() -> Iterator[Path]:
    """A short private directory for the backend's and the proxy's sockets (a unix socket's
    path holds about 107 bytes)."""
    path = Path("/tmp") / f"anet-cb-{uuid.uuid4().hex[:8]}"
    path.mkdir(mode=0o700)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@dataclass
class BackendRace:
    hub: HubProcess
    forward: BackendProxy
    seen: sdk.Seen
    alice: Node
    bob: Node

    async def ask(self) -> str:
        task = await self.alice.tasks.send(self.bob.aid, user_message("summarize this"),
                                           skill=SKILL)
        return str(task["id"])

    async def cancel_wins(self, task_id: str) -> None:
        canceled = await self.alice.tasks.cancel(self.bob.aid, task_id)
        assert canceled["status"]["state"] == CANCELED
        await eventually(lambda: state_of(self.bob, task_id) == CANCELED, "bob stopped")

    async def outcome(self, task_id: str, *, paid: bool) -> None:
        await assert_one_outcome(self.hub.data, self.alice.paths, self.bob.paths, task_id,
                                 paid=paid)


@asynccontextmanager
async def backend_race(root: Path, sockets: Path) -> AsyncIterator[BackendRace]:
    """The hub process; bob (x402 and backends, his backend behind the proxy) and alice at it;
    alice credited 1.00 USD and on bob's trust list."""
    hub = HubProcess(root / "hub", free_port())
    await asyncio.to_thread(hub.start)
    token = root / "backend.token"
    token.parent.mkdir(parents=True, exist_ok=True)
    token.write_text(sdk.TOKEN + "\n")
    token.chmod(0o600)
    try:
        async with RailProxy(hub.port) as rail, AsyncExitStack() as stack:
            seen = await stack.enter_async_context(sdk.sdk_backend(
                sockets / "backend.sock", streaming=False, token=sdk.TOKEN))
            forward = await stack.enter_async_context(BackendProxy(
                sockets / "proxy.sock", sockets / "backend.sock"))
            prepare(root / "bob", node={"name": "bob", "skills": [{"id": SKILL,
                                                                   "name": "Summarize"}]},
                    modules={"x402": {"prices": PRICES}, "backends": {"backends": [
                        {"match": SKILL, "url": forward.url, "token_file": str(token)}]}})
            prepare(root / "alice", modules={"x402": TIERS})
            bob, alice = await bob_and_credited_alice(
                stack, root, hub, rail.url, plugins_with(x402_plugin, backends_plugin))
            yield BackendRace(hub, forward, seen, alice, bob)
    finally:
        hub.stop()


async def test_a_cancel_with_the_forward_held_before_the_backend_settles_nothing(
        tmp_path: Path, sockets: Path) -> None:
    """Paid, and the forward on its way to the backend: the cancel voids the payment and ends
    the task on both nodes; the forward that reaches the backend afterwards is answered into
    a task that ended, and nothing settles."""
    async with backend_race(tmp_path, sockets) as net:
        hold = net.forward.hold(Moment.UNSEEN)
        task_id = await net.ask()
        await hold.until_reached()
        await net.cancel_wins(task_id)
        hold.release(pass_on=True)
        await hold.until_closed()
        await net.outcome(task_id, paid=False)


async def test_a_cancel_with_the_backends_answer_held_settles_nothing(
        tmp_path: Path, sockets: Path) -> None:
    """The backend did the work and its answer is still in the proxy: the cancel wins (the
    payee had not settled: it settles only once the answer is in), so the work is not paid
    and its artifacts reach no one."""
    async with backend_race(tmp_path, sockets) as net:
        hold = net.forward.hold(Moment.ANSWERED)
        task_id = await net.ask()
        await hold.until_reached()
        assert [message["text"] for message in net.seen.messages] == ["summarize this"]
        await net.cancel_wins(task_id)
        hold.release()
        await hold.until_closed()
        await net.outcome(task_id, paid=False)
        assert "artifacts" not in net.alice.tasks.get(None, task_id)
