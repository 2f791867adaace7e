"""The hooks of the module mcp: the command ``anet mcp`` and the node's own MCP tools."""

from __future__ import annotations

from anet_core.api import CliCommand, McpTool, hookimpl
from anet_mcp import command
from anet_mcp.operator import operator_tools
from anet_mcp.requester import requester_tools


@hookimpl
def anet_cli_commands() -> list[CliCommand]:
    return [CliCommand(
        "mcp", "serve this node's tools to an MCP host over stdio", command.configure,
        command.run, module="mcp",
        description="Serve MCP over standard input and output (how MCP hosts start a tool "
                    "server), talking to the running daemon through its control plane. "
                    "`anet mcp --print-config` prints the block to put in the host's "
                    "configuration.")]


@hookimpl
def anet_mcp_tools() -> list[McpTool]:
    return [*requester_tools(), *operator_tools()]
