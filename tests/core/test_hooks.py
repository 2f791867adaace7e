"""Every hookspec is documented, has an example and a test; each hook works end to end."""

from __future__ import annotations

import argparse
import inspect
import re
from contextlib import asynccontextmanager
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from pydantic import BaseModel, ConfigDict

from anet_core import hookimpl, hookspecs
from anet_core.cli.context import CliContext
from anet_core.cli.main import _commands, build_parser
from anet_core.config import validate_config
from anet_core.doctor import CheckContext, all_checks, run_checks
from anet_core.errors import AnetError
from anet_core.link import KeyState, PeerInfo, SearchQuery, Verification
from anet_core.link.card import module_skills
from anet_core.records import (
    BackendError,
    BackendKind,
    BackendStage,
    BackendTarget,
    CardExtension,
    CheckResult,
    CheckStatus,
    CliCommand,
    ConfigBlock,
    ControlRoutes,
    DirectorySource,
    DoctorCheck,
    InboundTask,
    Lifespan,
    PolicyVeto,
    Responder,
    SkillSource,
    TaskClaim,
)
from anet_core.settings import Settings
from anet_core.tasks import InboundPolicy, TaskError
from anet_core.tasks.responder import TaskResponder
from anet_core.wire import AgentCapabilities
from tests.support.nodes import plugins_with, running_node

HOOK_NAMES = sorted(name for name in dir(hookspecs) if name.startswith("anet_"))
DOCS = Path(__file__).parents[2] / "docs" / "plugins.md"


@pytest.mark.parametrize("name", HOOK_NAMES)
def test_every_hookspec_is_documented_with_an_example(name: str) -> None:
    doc = inspect.getdoc(getattr(hookspecs, name)) or ""
    assert "Example" in doc and "Called" in doc, f"{name} needs a docstring with an example"
    signature = f"{name}({', '.join(inspect.signature(getattr(hookspecs, name)).parameters)})"
    assert f"## `{signature}`" in DOCS.read_text(), f"docs/plugins.md lacks a heading {signature}"


@pytest.mark.parametrize("name", HOOK_NAMES)
def test_every_hookspec_has_a_test_in_the_core_tests(name: str) -> None:
    """The core's tests run without any module installed, so each hook is tested there, with a
    throwaway plugin, and nowhere else (a module's tests are skipped when it is absent)."""
    tests = Path(__file__).parents[1]
    pattern = re.compile(rf"def test_hook_{name}\b")
    homes = sorted(str(path.relative_to(tests)) for path in tests.rglob("test_*.py")
                   if pattern.search(path.read_text()))
    assert homes and all(home.startswith("core/") for home in homes), (
        f"test_hook_{name} must be defined in tests/core only, found in: {homes or 'none'}")


def test_every_hook_test_names_a_hook() -> None:
    sources = "\n".join(path.read_text() for path in Path(__file__).parents[1].rglob("test_*.py"))
    tested = set(re.findall(r"def test_hook_(\w+)\(", sources))
    assert tested - set(HOOK_NAMES) == set()


class GreeterConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")
    greeting: str = "hello"


class Greeter:
    @hookimpl
    def anet_config_blocks(self):
        return [ConfigBlock(module="greeter", model=GreeterConfig)]


def test_hook_anet_config_blocks(tmp_path: Path) -> None:
    plugins = plugins_with(Greeter())
    raw = {"modules": {"greeter": {"greeting": "hi"}}}
    config = validate_config(tmp_path / "config.json", raw, plugins.collect("anet_config_blocks"))
    assert config.module("greeter", GreeterConfig).greeting == "hi"
    defaults = validate_config(tmp_path / "config.json", {}, plugins.collect("anet_config_blocks"))
    assert defaults.module("greeter", GreeterConfig).greeting == "hello"


async def test_hook_anet_lifespan(tmp_path: Path) -> None:
    events: list[str] = []

    def lifespan(name: str):
        @asynccontextmanager
        async def open_():
            events.append(f"open {name}")
            yield
            events.append(f"close {name}")
        return open_

    class Ticker:
        @hookimpl
        def anet_lifespan(self, node):
            return [Lifespan("first", lifespan("first"),
                             module="test"), Lifespan("second", lifespan("second"), module="test")]

    async with running_node(tmp_path / "node", plugins_with(Ticker())):
        assert events == ["open first", "open second"]
    assert events == ["open first", "open second", "close second", "close first"]


async def test_hook_anet_routes(tmp_path: Path) -> None:
    routes = web.RouteTableDef()

    @routes.get("/hello")
    async def hello(request: web.Request) -> web.Response:
        return web.json_response({"hello": "world"})

    class Hello:
        @hookimpl
        def anet_routes(self, node):
            return [ControlRoutes(module="greeter", routes=list(routes))]

    async with running_node(tmp_path / "node", plugins_with(Hello())) as node:
        address = node.paths.control_addr.read_text().strip()
        token = node.paths.control_token.read_text().strip()
        async with aiohttp.ClientSession() as session:
            url = f"http://{address}/greeter/hello"
            async with session.get(url, headers={"Authorization": f"Bearer {token}"}) as response:
                assert response.status == 200
                assert await response.json() == {"hello": "world"}
            async with session.get(url) as response:
                assert response.status == 401


async def test_hook_anet_doctor_checks(tmp_path: Path) -> None:
    async def fine(ctx):
        return CheckResult(CheckStatus.OK, "fine")

    async def broken(ctx):
        raise RuntimeError("boom")

    class Checks:
        @hookimpl
        def anet_doctor_checks(self):
            return [DoctorCheck("greeter-fine", "greeter", "fine", fine),
                    DoctorCheck("greeter-broken", "greeter", "crashes", broken)]

    plugins = plugins_with(Checks())
    checks = [check for check in all_checks(plugins) if check.module == "greeter"]
    outcomes = {outcome.check.name: outcome.result
                for outcome in await run_checks(checks, CheckContext(Settings(data_dir=tmp_path),
                                                                     plugins))}
    assert outcomes["greeter-fine"].status is CheckStatus.OK
    assert outcomes["greeter-broken"].status is CheckStatus.FAIL
    assert "boom" in outcomes["greeter-broken"].summary


def test_hook_anet_cli_commands(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def run_hello(args: argparse.Namespace, ctx: CliContext) -> int:
        print(f"hello {args.who}")
        return 7

    class Hello:
        @hookimpl
        def anet_cli_commands(self):
            return [CliCommand("hello", "say hello", lambda p: p.add_argument("who"), run_hello,
                               module="test")]

    ctx = CliContext(settings=Settings(data_dir=tmp_path), plugins=plugins_with(Hello()))
    args = build_parser(_commands(ctx)).parse_args(["hello", "world"])
    assert args._command.run(args, ctx) == 7
    assert capsys.readouterr().out == "hello world\n"


def test_hook_anet_take_task() -> None:
    async def serve(task, responder):
        return None

    class Declines:
        @hookimpl
        def anet_take_task(self, node, task):
            return None

    class Takes:
        @hookimpl
        def anet_take_task(self, node, task):
            return TaskClaim(module="greeter", serve=serve) if task.skill == "greet" else None

    plugins = plugins_with(Takes(), Declines())
    task = InboundTask(task_id="t1", context_id="c1", peer_aid="a" * 32, trusted=True,
                       skill="greet", message={"role": "ROLE_USER", "parts": []})
    claim = plugins.hook.anet_take_task(node=None, task=task)
    assert claim is not None and claim.module == "greeter"
    other = InboundTask(**{**task.__dict__, "skill": "other"})
    assert plugins.hook.anet_take_task(node=None, task=other) is None


def test_the_task_layers_responder_keeps_the_hook_contract() -> None:
    """``TaskClaim.serve`` is typed with the Responder protocol; the task layer's implementation
    has every member of it, with the same parameters."""
    members = {name for name in vars(Responder) if not name.startswith("_")}
    members |= set(Responder.__annotations__)
    assert {"cancelled", "request_metadata", "task", "ended", "complete", "to_inbox"} <= members
    responder = TaskResponder(provider=None, task=InboundTask(  # type: ignore[arg-type]
        task_id="t1", context_id="c1", peer_aid="a" * 32, trusted=True, skill=None,
        message={}, metadata={"k": "v"}))
    for name in sorted(members):
        assert hasattr(responder, name), f"TaskResponder lacks {name}"
        contract = getattr(Responder, name, None)
        if inspect.isfunction(contract):
            implemented = inspect.signature(getattr(TaskResponder, name))
            assert implemented == inspect.signature(contract), name
    assert responder.request_metadata == {"k": "v"} and not responder.cancelled.is_set()


def test_hook_anet_card_extensions() -> None:
    class Payments:
        @hookimpl
        def anet_card_extensions(self, node, peer):
            if not (peer.card and peer.card.get("charge") != "free"):
                return []
            return [CardExtension(module="pay", uri="https://example.org/ext/pay/v1",
                                  description="pays", params={"payee": peer.aid})]

    class Marker:
        @hookimpl
        def anet_card_extensions(self, node, peer):
            return [CardExtension(module="marker", uri="urn:example:marker", required=True)]

    plugins = plugins_with(Marker(), Payments())
    charging = PeerInfo(aid="b" * 32, verification=Verification.VERIFIED,
                        key_state=KeyState.FRESH, card={"charge": "0.01 USDC"})
    extensions = plugins.collect("anet_card_extensions", node=None, peer=charging)
    assert [(extension.module, extension.uri) for extension in extensions] == [
        ("pay", "https://example.org/ext/pay/v1"), ("marker", "urn:example:marker")]
    declared = AgentCapabilities(extensions=[e.as_agent_extension() for e in extensions]).wire()
    assert declared["extensions"] == [
        {"uri": "https://example.org/ext/pay/v1", "description": "pays",
         "params": {"payee": "b" * 32}},
        {"uri": "urn:example:marker", "required": True}]
    free = PeerInfo(aid="c" * 32, verification=Verification.VERIFIED,
                    key_state=KeyState.FRESH, card={"charge": "free"})
    assert [e.module for e in plugins.collect("anet_card_extensions", node=None, peer=free)] == [
        "marker"]


async def test_hook_anet_backend_kinds() -> None:
    @asynccontextmanager
    async def open_echo(target: BackendTarget):
        if target.url.endswith("/down"):
            raise BackendError(BackendStage.UNREACHABLE, f"{target.url} does not answer")

        class Echo:
            async def send(self, message, metadata, *, blocking=False):
                yield {"message": {"messageId": "m-2", "role": "ROLE_AGENT",
                                   "parts": message["parts"], "metadata": metadata}}

            async def cancel(self, task_id):
                raise BackendError(BackendStage.WRITTEN, f"{task_id} is gone")

        yield Echo()

    class EchoKind:
        @hookimpl
        def anet_backend_kinds(self):
            return [BackendKind(name="echo", schemes=("echo",), open=open_echo, module="echo")]

    [kind] = [kind for kind in plugins_with(EchoKind()).collect("anet_backend_kinds")
              if kind.module == "echo"]
    target = BackendTarget(match="*", url="ECHO://here")
    assert target.scheme in kind.schemes and kind.diagnose is None and kind.skills is None
    async with kind.open(target) as channel:
        events = [event async for event in channel.send(
            {"role": "ROLE_USER", "parts": [{"text": "hi"}]}, {"anet.trusted": True})]
        assert events == [{"message": {"messageId": "m-2", "role": "ROLE_AGENT",
                                       "parts": [{"text": "hi"}],
                                       "metadata": {"anet.trusted": True}}}]
        with pytest.raises(BackendError) as caught:
            await channel.cancel("t-1")
        assert caught.value.stage is BackendStage.WRITTEN
    with pytest.raises(BackendError, match="does not answer") as caught:
        async with kind.open(BackendTarget(match="*", url="echo://here/down")):
            pass
    assert caught.value.stage is BackendStage.UNREACHABLE


class StrangersWelcome:
    """Vetoes the open policy, as a module that serves strangers would."""

    def __init__(self) -> None:
        self.asked: list[object] = []

    @hookimpl
    def anet_policy_veto(self, node, policy):
        self.asked.append(policy)
        if policy is InboundPolicy.OPEN:
            return PolicyVeto(module="greeter", reason="modules.greeter.strangers is set",
                              hint="unset modules.greeter.strangers")
        return None


async def test_hook_anet_policy_veto(tmp_path: Path) -> None:
    welcome = StrangersWelcome()
    async with running_node(tmp_path / "node", plugins_with(welcome)) as node:
        with pytest.raises(TaskError) as refused:
            node.tasks.set_policy("open")
        assert refused.value.reason == "policy-refused"
        assert "modules.greeter.strangers is set (module greeter)" in refused.value.message
        assert refused.value.hint == "unset modules.greeter.strangers"
        assert node.tasks.policy is InboundPolicy.TRUSTED
        assert node.tasks.set_policy("closed") is InboundPolicy.CLOSED
    # asked at the start (the policy in force), then for each change, always with the enum
    assert welcome.asked == [InboundPolicy.TRUSTED, InboundPolicy.OPEN, InboundPolicy.CLOSED]
    assert all(type(policy) is InboundPolicy for policy in welcome.asked)


async def test_hook_anet_card_skills(tmp_path: Path) -> None:
    class Greeter:
        @hookimpl
        def anet_card_skills(self, node):
            async def read():
                return [{"id": "greet", "name": "Greet", "description": "", "tags": ["hello"]}]

            async def broken():
                raise RuntimeError("the module's source is down")

            return [SkillSource("greeter", read), SkillSource("broken", broken)]

    class Second:
        @hookimpl
        def anet_card_skills(self, node):
            async def read():
                return [{"id": "qa", "name": "Q&A", "tags": []}]

            return [SkillSource("second", read)]

    async with running_node(tmp_path / "node", plugins_with(Second(), Greeter())) as node:
        skills = await module_skills(lambda: node.plugins.collect("anet_card_skills", node=node))
    assert [skill["id"] for skill in skills] == ["greet", "qa"]  # hook order; broken left out


async def test_hook_anet_directory_sources(tmp_path: Path,
                                          caplog: pytest.LogCaptureFixture) -> None:
    asked: list[SearchQuery] = []

    class Greeter:
        @hookimpl
        def anet_directory_sources(self, node):
            async def listed(search):
                asked.append(search)
                agents = [{"aid": "greeter@lan", "name": "Greeter", "skills": [{"id": "greet"}],
                           "directPeer": "lan", "url": "http://greeter.lan/a2a"},
                          {"aid": "echo@lan", "name": "Echo", "skills": [{"id": "echo"}],
                           "directPeer": "lan", "url": "http://echo.lan/a2a"}]
                return [agent for agent in agents
                        if not search.skill or search.skill in [s["id"] for s in agent["skills"]]]

            async def broken(search):
                raise RuntimeError("the module's source is down")

            return [DirectorySource("greeter", listed), DirectorySource("broken", broken)]

    async with running_node(tmp_path / "node", plugins_with(Greeter())) as node:
        address = node.paths.control_addr.read_text().strip()
        token = node.paths.control_token.read_text().strip()
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as http:
            async def agents(query: str) -> tuple[int, dict]:
                async with http.get(f"http://{address}/tasks/agents?{query}") as response:
                    return response.status, await response.json()

            status, page = await agents("skill=greet&q=hello")
            assert status == 200
            # Not joined: the hub's error beside the modules' agents, each marked by its module.
            assert page["agents"] == [{"aid": "greeter@lan", "name": "Greeter",
                                       "skills": [{"id": "greet"}], "directPeer": "lan",
                                       "url": "http://greeter.lan/a2a", "source": "greeter"}]
            assert "hub" in page["hubError"] and page["nextCursor"] is None
            assert (asked[-1].skill, asked[-1].q, asked[-1].tag) == ("greet", "hello", None)
            status, page = await agents("")
            assert [agent["aid"] for agent in page["agents"]] == ["greeter@lan", "echo@lan"]
            # The cursor is the hub's: a later page has no module entries, so the hub's error.
            calls = len(asked)
            status, page = await agents("cursor=abc")
            assert status != 200 and page["error"] == "hub-unavailable"
            assert len(asked) == calls
            status, page = await agents("skill=nothing")
            assert status != 200 and page["error"] == "hub-unavailable"
    assert "event=directory-source-failed module=broken" in caplog.text


def test_duplicate_records_are_refused_naming_both_modules(tmp_path: Path) -> None:
    def command(name: str, module: str, *aliases: str) -> CliCommand:
        return CliCommand(name, "help", lambda parser: None, lambda args, ctx: 0,
                          aliases=aliases, module=module)

    def cli_with(*commands: CliCommand) -> CliContext:
        class Commands:
            @hookimpl
            def anet_cli_commands(self):
                return list(commands)
        return CliContext(settings=Settings(data_dir=tmp_path), plugins=plugins_with(Commands()))

    with pytest.raises(AnetError) as caught:
        _commands(cli_with(command("peers", "first"), command("peers", "second")))
    assert caught.value.message == ("the modules first and second both declare the command "
                                    "`anet peers`")
    assert caught.value.reason == "cli-commands-duplicate"
    with pytest.raises(AnetError, match=r"the modules first and second both declare the "
                                        r"command `anet peers ls`"):
        _commands(cli_with(command("peers list", "first", "ls"), command("peers ls", "second")))
    assert len(_commands(cli_with(command("ls", "first"), command("peers ls", "second")))) > 2

    async def fine(ctx):
        return CheckResult(CheckStatus.OK, "fine")

    class Checks:
        @hookimpl
        def anet_doctor_checks(self):
            return [DoctorCheck("greeter-fine", "greeter", "fine", fine),
                    DoctorCheck("greeter-fine", "other", "fine too", fine)]

    with pytest.raises(AnetError, match=r"^the modules greeter and other both declare the "
                                        r"doctor check greeter-fine$"):
        all_checks(plugins_with(Checks()))


def test_commands_of_several_words_nest_below_a_shared_group(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def run_list(args: argparse.Namespace, ctx: CliContext) -> int:
        print(f"list json={args.json}")
        return 0

    def run_wire(args: argparse.Namespace, ctx: CliContext) -> int:
        print(f"wire {args.client}")
        return 0

    class Directory:
        @hookimpl
        def anet_cli_commands(self):
            return [CliCommand("peers", "list",
                               lambda p: p.add_argument("--json", action="store_true"), run_list,
                               module="test")]

    class Wiring:
        @hookimpl
        def anet_cli_commands(self):
            return [CliCommand("peers wire", "wire", lambda p: p.add_argument("client"), run_wire,
                               module="test")]

    ctx = CliContext(settings=Settings(data_dir=tmp_path),
                     plugins=plugins_with(Wiring(), Directory()))
    parser = build_parser(_commands(ctx))
    for argv in (["peers", "--json"], ["peers", "wire", "hermes"]):
        args = parser.parse_args(argv)
        assert args._command.run(args, ctx) == 0
    assert capsys.readouterr().out == "list json=True\nwire hermes\n"
