"""The module mcp serves the tools other modules add (``anet_mcp_tools``) beside its own; a
module whose hook fails, or that takes a name already served, does not stop the others."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from mcp import Client
from pydantic import BaseModel, ConfigDict

from anet_core import hookimpl
from anet_core.control.client import AsyncControlClient
from anet_core.plugins import make_plugins
from anet_core.records import McpCall, McpResult, McpTool
from anet_mcp import plugin as mcp_plugin
from anet_mcp.server import build_server, collect_tools
from tests.conftest import running_node


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
                McpTool("greeter_broken", "A tool that fails", Empty, broken, module="greeter"),
                McpTool("node_status", "A second tool of a taken name", Empty, whoami,
                        module="greeter")]


class Failing:
    @hookimpl
    def anet_mcp_tools(self):
        raise RuntimeError("no tools today")


async def test_module_tools_are_served_beside_the_node_tools(
        tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    plugins = make_plugins(load_entry_points=False)
    for name, module in (("mcp", mcp_plugin), ("greeter", Greeter()), ("failing", Failing())):
        plugins.pm.register(module, name=name)
    with caplog.at_level(logging.ERROR, logger="anet.mcp"):
        tools = collect_tools(plugins)
    assert "no tools today" in caplog.text and "both add the MCP tool node_status" in caplog.text
    assert tools["node_status"].module == "mcp"
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
