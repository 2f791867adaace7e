"""``anet_mcp_tools``: a module's MCP tools are records of the core (no MCP SDK in the core),
whose handler reaches the running daemon through the control plane and reports progress."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pydantic import BaseModel, ConfigDict, Field

from anet_core import hookimpl
from anet_core.control.client import AsyncControlClient
from anet_core.records import McpCall, McpResult, McpTool
from tests.core.test_hooks import plugins_with
from tests.support.nodes import running_node

CORE = Path(__file__).resolve().parents[2] / "anet_core"


class GreetArguments(BaseModel):
    model_config = ConfigDict(extra="forbid")
    who: str = Field(description="whom to greet")


async def greet(arguments: GreetArguments, call: McpCall) -> McpResult:
    await call.progress("asking the node")
    status = await call.control.get("/core/status")
    return McpResult(text=f"hello {arguments.who} from {status['aid']}",
                     data={"aid": status["aid"]})


class Greeter:
    @hookimpl
    def anet_mcp_tools(self):
        return [McpTool(name="greeter_greet", description="Greet someone through the node",
                        arguments=GreetArguments, run=greet, read_only=True, open_world=False,
                        module="greeter")]


async def test_hook_anet_mcp_tools(tmp_path: Path) -> None:
    plugins = plugins_with(Greeter())
    [tool] = plugins.collect("anet_mcp_tools")
    assert (tool.name, tool.module, tool.read_only, tool.open_world) == \
        ("greeter_greet", "greeter", True, False)
    assert tool.arguments.model_json_schema()["required"] == ["who"]
    notes: list[str] = []

    async def progress(message: str) -> None:
        notes.append(message)

    async with running_node(tmp_path / "node", plugins) as node, \
            AsyncControlClient(node.paths) as control:
        result = await tool.run(tool.arguments.model_validate({"who": "bob"}),
                                McpCall(control=control, progress=progress))
    assert result == McpResult(text=f"hello bob from {node.aid}", data={"aid": node.aid})
    assert notes == ["asking the node"]


def test_tool_names_are_snake_case_and_descriptions_one_line() -> None:
    with pytest.raises(ValueError, match="snake_case"):
        McpTool(name="Greet-Me", description="x", arguments=GreetArguments, run=greet,
                module="greeter")
    with pytest.raises(ValueError, match="one line"):
        McpTool(name="greet", description="two\nlines", arguments=GreetArguments, run=greet,
                module="greeter")


def test_the_core_does_not_import_the_mcp_sdk() -> None:
    imports = re.compile(r"^\s*(from|import)\s+mcp\b", re.MULTILINE)
    offenders = [str(path) for path in CORE.rglob("*.py") if imports.search(path.read_text())]
    assert offenders == []
