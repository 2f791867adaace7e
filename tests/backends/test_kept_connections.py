"""The forwards of a running node keep a backend's unix-socket connection for the next forward
(``pooled_a2a``), and what is checked before a kept connection carries a request
(anet_backends/transport.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web

from anet_backends.a2a_kind import pooled_a2a
from tests.backends.harness import completed, fake_backend, inbound, make_harness

pytestmark = pytest.mark.timeout(60)


def answering(transports: list[Any]) -> Any:
    async def answer(request: web.Request, body: dict[str, Any], n: int) -> web.Response:
        transports.append(request.transport)
        return web.json_response(completed(body["id"]))

    return answer


@pytest.mark.parametrize("pooled", [True, False])
async def test_forwards_one_after_another_share_one_connection_while_the_module_runs(
        sock_dir: Path, pooled: bool) -> None:
    path, transports = sock_dir / "a2a.sock", []
    async with fake_backend(path, answering(transports)), pooled_a2a() as open_forward:
        harness = make_harness(f"unix://{path}", open=open_forward if pooled else None)
        for text in ("one", "two", "three"):
            assert (await harness.serve(inbound(text))).kinds()[-1] == "complete"
    assert len(transports) == 3
    assert len({id(transport) for transport in transports}) == (1 if pooled else 3)


async def test_a_socket_replaced_since_is_not_reached_through_a_kept_connection(
        sock_dir: Path) -> None:
    path, transports = sock_dir / "a2a.sock", []
    async with pooled_a2a() as open_forward:
        harness = make_harness(f"unix://{path}", open=open_forward)
        async with fake_backend(path, answering(transports)) as old:
            await harness.serve(inbound("one"))
            # The old server keeps serving its connections; another one binds the path.
            path.rename(sock_dir / "old.sock")
            async with fake_backend(path, answering(transports)) as new:
                recorder = await harness.serve(inbound("two"))
    assert recorder.kinds()[-1] == "complete"
    assert (len(old.posts), len(new.posts)) == (1, 1)


async def test_a_kept_connection_carries_nothing_once_its_directory_is_unsafe(
        sock_dir: Path) -> None:
    path, transports = sock_dir / "a2a.sock", []
    async with fake_backend(path, answering(transports)) as backend, \
            pooled_a2a() as open_forward:
        harness = make_harness(f"unix://{path}", open=open_forward)
        await harness.serve(inbound("one"))
        sock_dir.chmod(0o1777)
        recorder = await harness.serve(inbound("secret text"))
    assert recorder.kinds() == ["to_inbox"]  # refused, left to the operator
    assert "can be changed by every user" in recorder.events[0][1]
    assert len(backend.posts) == 1  # the kept connection carried nothing more


async def test_any_number_of_turns_are_open_at_once_on_one_backend(sock_dir: Path) -> None:
    """A forward holds its connection for its turn: the shared session does not make the
    101st wait for one of the first hundred to end."""
    path, release, count = sock_dir / "a2a.sock", asyncio.Event(), 110

    async def answer(request: web.Request, body: dict[str, Any], n: int) -> web.Response:
        await release.wait()
        return web.json_response(completed(body["id"]))

    async with fake_backend(path, answer) as backend, pooled_a2a() as open_forward:
        harness = make_harness(f"unix://{path}", open=open_forward)
        turns = [asyncio.ensure_future(harness.serve(inbound(f"task {n}")))
                 for n in range(count)]
        async with asyncio.timeout(20):
            while len(backend.posts) < count:
                await asyncio.sleep(0.01)
        release.set()
        recorders = await asyncio.gather(*turns)
    assert all(recorder.kinds()[-1] == "complete" for recorder in recorders)
