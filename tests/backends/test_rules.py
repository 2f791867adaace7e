"""Forwarding rules: who is forwarded, the start checks, retries before and after the write."""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
from aiohttp import web
from pydantic import ValidationError

from anet_backends import plugin
from anet_backends.a2a_kind import A2A_KIND
from anet_backends.config import Backend, BackendsConfig, Retry
from anet_backends.kinds import installed_kinds
from anet_backends.service import Backends, check_policy
from anet_core.api import AnetError, BackendKind, InboundPolicy, InboundTask, hookimpl
from anet_core.plugins import make_plugins
from tests.backends.harness import (
    Recorder,
    completed,
    fake_backend,
    inbound,
    make_harness,
    uncounted,
)

pytestmark = pytest.mark.timeout(30)


def service(*backends: dict[str, Any]) -> Backends:
    config = BackendsConfig(backends=[Backend(**backend) for backend in backends])
    return Backends(config, {"unix": A2A_KIND}, uncounted, idle_timeout_s=5)


def test_only_trusted_peers_unless_accept_untrusted_and_toolless() -> None:
    plain = service({"match": "*", "url": "unix:///run/a.sock"})
    assert plain.claim(inbound("hi"), InboundPolicy.TRUSTED) is not None
    assert plain.claim(inbound("hi", trusted=False), InboundPolicy.TRUSTED) is None
    open_door = service({"match": "*", "url": "unix:///run/a.sock", "accept_untrusted": True,
                         "toolless": True})
    assert open_door.claim(inbound("hi", trusted=False), InboundPolicy.TRUSTED) is not None
    # the policy may have been opened after the start: untrusted tasks stay in the inbox
    assert open_door.claim(inbound("hi", trusted=False), InboundPolicy.OPEN) is None


def test_only_text_tasks_and_a_skills_own_backend_first() -> None:
    both = service({"match": "*", "url": "unix:///run/a.sock"},
                   {"match": "translate", "url": "unix:///run/b.sock"})
    data = InboundTask(**{**inbound("x").__dict__,
                          "message": {"messageId": "m", "role": "ROLE_USER",
                                      "parts": [{"data": {"a": 1}}]}})
    assert both.claim(data, InboundPolicy.TRUSTED) is None
    claim = both.claim(inbound("hola", skill="translate"), InboundPolicy.TRUSTED)
    assert claim is not None and claim.serve.__self__.target.match == "translate"  # type: ignore[attr-defined]
    claim = both.claim(inbound("hi", skill="other"), InboundPolicy.TRUSTED)
    assert claim is not None and claim.serve.__self__.target.match == "*"  # type: ignore[attr-defined]


def test_the_open_policy_is_refused_with_an_untrusted_backend_naming_it() -> None:
    config = BackendsConfig(backends=[
        Backend(match="*", url="unix:///a.sock"),
        Backend(match="chat", url="unix:///b.sock", accept_untrusted=True, toolless=True)])
    check_policy(config, InboundPolicy.TRUSTED)
    with pytest.raises(AnetError, match=r"backends\[1\]\.accept_untrusted \(match 'chat'\)"):
        check_policy(config, InboundPolicy.OPEN)


def test_two_kinds_for_one_scheme_name_both_modules() -> None:
    class Elsewhere:
        @hookimpl
        def anet_backend_kinds(self):
            return [BackendKind(name="other", schemes=("unix",), open=A2A_KIND.open,
                                module="elsewhere")]

    plugins = make_plugins(load_entry_points=False)
    plugins.pm.register(plugin, name="backends")
    plugins.pm.register(Elsewhere(), name="elsewhere")
    with pytest.raises(AnetError, match=r"the modules elsewhere and backends both declare the "
                                        r"backend scheme 'unix'"):
        installed_kinds(plugins)


def test_an_unknown_scheme_at_start_names_the_backend_and_key() -> None:
    config = BackendsConfig.model_construct(
        backends=[Backend.model_construct(match="*", url="gopher://x", accept_untrusted=False,
                                          toolless=False, allow_tcp=False, token_file=None,
                                          expected_user=None, socket_group=None,
                                          peer_check="full")],
        retry=BackendsConfig().retry)
    with pytest.raises(AnetError, match=r"backends\[0\]\.url 'gopher://x'"):
        Backends(config, {"unix": A2A_KIND}, uncounted, idle_timeout_s=5)


async def test_the_forwards_of_a_running_module_open_through_the_kinds_pooled_opener() -> None:
    """``BackendKind.pooled`` is entered once for the module's run, for the kinds its backends
    use; every forward opens through what it yielded, and it is closed when the module stops."""
    events: list[str] = []

    def opener(name: str) -> Any:
        @asynccontextmanager
        async def open_echo(target: Any) -> Any:
            events.append(f"{name} {target.match}")

            class Echo:
                async def send(self, message: Any, metadata: Any, *, blocking: bool = False
                               ) -> Any:
                    yield {"message": {"messageId": "m", "role": "ROLE_AGENT",
                                       "parts": message["parts"]}}

            yield Echo()

        return open_echo

    @asynccontextmanager
    async def pooled() -> Any:
        events.append("pooled")
        yield opener("shared")
        events.append("closed")

    kinds = {"echo": BackendKind(name="echo", schemes=("echo",), open=opener("own"),
                                 pooled=pooled, module="echo"),
             "unix": A2A_KIND}  # installed, used by no backend: its pool is not opened
    config = BackendsConfig(backends=[Backend(match="*", url="echo://one"),
                                      Backend(match="chat", url="echo://two")])
    async with Backends.running(config, kinds, uncounted, idle_timeout_s=5) as service:
        for skill in (None, "chat"):
            claim = service.claim(inbound("hi", skill=skill), InboundPolicy.TRUSTED)
            assert claim is not None
            recorder = Recorder()
            await claim.serve(inbound("hi", skill=skill), recorder)  # type: ignore[arg-type]
            assert recorder.kinds() == ["reply_message"]
    assert events == ["pooled", "shared *", "shared chat", "closed"]


async def test_retries_stop_at_give_up_after(sock_dir: Path) -> None:
    harness = make_harness(f"unix://{sock_dir}/absent.sock", give_up_after="500ms")
    started = time.monotonic()
    recorder = await harness.serve(inbound("hello"))
    elapsed = time.monotonic() - started
    assert recorder.kinds() == ["fail"]
    assert harness.evidence_kinds() == ["backends.failed"]
    # waits of 50, 100, 200 ms; the next (400 ms) would start after 500 ms
    assert harness.evidence[0][1]["attempts"] == 4
    assert 0.3 < elapsed < 2


async def test_give_up_after_zero_tries_once(sock_dir: Path) -> None:
    harness = make_harness(f"unix://{sock_dir}/absent.sock", give_up_after="0")
    recorder = await harness.serve(inbound("hello"))
    assert recorder.kinds() == ["fail"] and harness.evidence[0][1]["attempts"] == 1


@pytest.mark.parametrize("interval", ["0", "0s"])
def test_a_zero_max_interval_is_refused(interval: str) -> None:
    with pytest.raises(ValidationError, match="max_interval must be a positive duration"):
        Retry(max_interval=interval)


async def test_after_the_write_a_500_is_not_retried(sock_dir: Path) -> None:
    async def answer(request: web.Request, body: dict[str, Any], n: int) -> web.Response:
        return web.Response(status=500, text="boom")

    path = sock_dir / "a.sock"
    async with fake_backend(path, answer) as backend:
        harness = make_harness(f"unix://{path}", give_up_after="5s")
        recorder = await harness.serve(inbound("hello"))
    assert len(backend.posts) == 1
    assert recorder.kinds() == ["fail"] and "HTTP 500" in harness.evidence[0][1]["reason"]
    assert "500" not in recorder.events[0][1]  # the requester learns no detail of this machine


async def test_after_the_write_a_503_is_retried(sock_dir: Path) -> None:
    async def answer(request: web.Request, body: dict[str, Any], n: int) -> web.Response:
        if n < 3:
            return web.Response(status=503, text="busy")
        return web.json_response(completed(body["id"]))

    path = sock_dir / "a.sock"
    async with fake_backend(path, answer) as backend:
        harness = make_harness(f"unix://{path}", give_up_after="5s")
        recorder = await harness.serve(inbound("hello"))
    assert len(backend.posts) == 3
    assert {post["params"]["message"]["messageId"] for post in backend.posts} == {
        backend.posts[0]["params"]["message"]["messageId"]}
    assert recorder.kinds() == ["artifact", "complete"]


async def test_requester_metadata_cannot_claim_another_peer(sock_dir: Path) -> None:
    async def answer(request: web.Request, body: dict[str, Any], n: int) -> web.Response:
        return web.json_response(completed(body["id"]))

    path = sock_dir / "a.sock"
    task = inbound("hello")
    task.message["metadata"] = {"anet.peer_aid": "someone-else", "mine": 1}
    async with fake_backend(path, answer) as backend:
        await make_harness(f"unix://{path}").serve(task)
    sent = backend.posts[0]["params"]
    assert sent["message"]["metadata"] == {"mine": 1, "anet.peer_aid": task.peer_aid,
                                           "anet.trusted": True}
    assert sent["metadata"] == {"anet.peer_aid": task.peer_aid, "anet.trusted": True}
    assert sent["message"]["parts"] == task.message["parts"]
    assert backend.posts[0]["method"] == "SendMessage"


async def test_the_daemon_keeps_serving_while_a_backend_hangs(sock_dir: Path) -> None:
    async def hang(request: web.Request, body: dict[str, Any], n: int) -> web.Response:
        await asyncio.sleep(30)
        raise AssertionError("unreachable")

    async def fine(request: web.Request, body: dict[str, Any], n: int) -> web.Response:
        return web.json_response(completed(body["id"]))

    async with fake_backend(sock_dir / "hang.sock", hang), \
            fake_backend(sock_dir / "fine.sock", fine):
        stuck = make_harness(f"unix://{sock_dir}/hang.sock", idle_timeout_s=1.5)
        hanging = asyncio.create_task(stuck.serve(inbound("a")))
        recorder = await make_harness(f"unix://{sock_dir}/fine.sock").serve(inbound("b"),
                                                                           timeout=1)
        assert recorder.kinds()[-1] == "complete" and not hanging.done()
        stuck_recorder = await hanging
    # held past the (shrunk) minute: announced as working, then failed for its silence
    assert stuck_recorder.kinds() == ["working", "fail"]
    assert "sent nothing for 1.5 s" in stuck.evidence[-1][1]["reason"]
