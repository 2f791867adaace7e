"""The module mcp serves the tools other modules add (``anet_mcp_tools``) beside its own, lists
its own first, and refuses two tools of one name with an error naming both modules."""

from __future__ import annotations

from pathlib import Path

import pytest
from mcp import Client
from pydantic import BaseModel, ConfigDict

from anet_core import hookimpl
from anet_core.control.client import AsyncControlClient
from anet_core.errors import AnetError
from anet_core.plugins import Plugins, make_plugins
from anet_core.records import McpCall, McpResult, McpTool
from anet_mcp import plugin as mcp_plugin
from anet_mcp.server import build_server, collect_tools
from tests.support.nodes import running_node


class Empty(BaseModel):
    model_config = ConfigDict(extra="forbid")


async def whoami(arguments: Empty, call: McpCall) -> McpResult:
    await call.progress("reading the status")
    status = await call.control.get("/core/status")
    return McpResult(text=f"I am {status['aid']}", data={"aid": status["aid"]})


async def broken(arguments: Empty, call: McpCall) -> McpResult:
    raise RuntimeError("the greeter lost its voice")


class Greeter:
    @hookimpl
    def anet_mcp_tools(self):
        return [McpTool("greeter_whoami", "Say which node this is", Empty, whoami,
                        read_only=True, open_world=False, module="greeter"),
                McpTool("greeter_broken", "A tool that fails", Empty, broken, module="greeter")]


class Squatter:
    @hookimpl
    def anet_mcp_tools(self):
        return [McpTool("node_status", "A second tool of a taken name", Empty, whoami,
                        module="squatter")]


def plugins_with(*extra: tuple[str, object]) -> Plugins:
    plugins = make_plugins(load_entry_points=False)
    for name, module in (("greeter", Greeter()), ("mcp", mcp_plugin), *extra):
        plugins.pm.register(module, name=name)
    return plugins


def test_two_tools_of_one_name_are_refused_naming_both_modules() -> None:
    with pytest.raises(AnetError) as refused:
        collect_tools(plugins_with(("squatter", Squatter())))
    assert refused.value.reason == "mcp-tools-duplicate"
    assert "mcp" in refused.value.message and "squatter" in refused.value.message
    assert "the MCP tool node_status" in refused.value.message


async def test_module_tools_are_served_beside_the_node_tools(tmp_path: Path) -> None:
    plugins = plugins_with()
    tools = collect_tools(plugins)
    assert next(iter(tools.values())).module == "mcp"  # the node's own first
    assert {"greeter_whoami", "greeter_broken", "send_task"} <= set(tools)

    notes: list[str] = []

    async def on_progress(progress: float, total: float | None, message: str | None) -> None:
        notes.append(message or "")

    async with running_node(tmp_path / "node", plugins) as node, \
            AsyncControlClient(node.paths) as control, \
            Client(build_server(tools, control, version="test")) as client:
        listed = {tool.name: tool for tool in (await client.list_tools()).tools}
        assert listed["greeter_whoami"].annotations.read_only_hint is True
        result = await client.call_tool("greeter_whoami", {}, progress_callback=on_progress)
        assert not result.is_error and result.structured_content == {"aid": node.aid}
        assert notes == ["reading the status"]
        failed = await client.call_tool("greeter_broken", {})
        assert failed.is_error and failed.structured_content["error"] == "tool-failed"
        assert "the greeter lost its voice" in failed.structured_content["message"]
        assert not (await client.call_tool("node_status", {})).is_error
