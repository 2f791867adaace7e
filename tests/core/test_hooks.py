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
from anet_core.plugins import make_plugins
from anet_core.records import (
    CheckResult,
    CheckStatus,
    CliCommand,
    ConfigBlock,
    ControlRoutes,
    DoctorCheck,
    InboundTask,
    Lifespan,
    TaskClaim,
)
from anet_core.settings import Settings
from tests.conftest import running_node

HOOK_NAMES = sorted(name for name in dir(hookspecs) if name.startswith("anet_"))
DOCS = Path(__file__).parents[2] / "docs" / "plugins.md"


@pytest.mark.parametrize("name", HOOK_NAMES)
def test_every_hookspec_is_documented_with_an_example(name: str) -> None:
    doc = inspect.getdoc(getattr(hookspecs, name)) or ""
    assert "Example" in doc and "Called" in doc, f"{name} needs a docstring with an example"
    signature = f"{name}({', '.join(inspect.signature(getattr(hookspecs, name)).parameters)})"
    assert f"## `{signature}`" in DOCS.read_text(), f"docs/plugins.md lacks a heading {signature}"


@pytest.mark.parametrize("name", HOOK_NAMES)
def test_every_hookspec_has_a_test(name: str) -> None:
    sources = "\n".join(path.read_text() for path in Path(__file__).parents[1].rglob("test_*.py"))
    assert re.search(rf"def test_hook_{name}\b", sources), f"no test named test_hook_{name}"


def plugins_with(*extra: object):
    plugins = make_plugins(load_entry_points=False)
    for index, plugin in enumerate(extra):
        plugins.pm.register(plugin, name=f"test-plugin-{index}")
    plugins.pm.check_pending()
    return plugins


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
