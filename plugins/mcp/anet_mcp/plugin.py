"""The hooks of the module mcp: the command ``anet mcp`` and the node's own MCP tools.

The command's code (and the MCP SDK it serves with) loads when ``anet mcp`` runs, and the tools
when something asks for them: no other command and no daemon loads either.
"""

from __future__ import annotations

from anet_core.api import CliCommand, McpTool, hookimpl, lazy


@hookimpl
def anet_cli_commands() -> list[CliCommand]:
    return [CliCommand(
        "mcp", "serve this node's tools to an MCP host over stdio",
        lazy("anet_mcp.command:configure"), lazy("anet_mcp.command:run"), module="mcp",
        description="Serve MCP over standard input and output (how MCP hosts start a tool "
                    "server), talking to the running daemon through its control plane. "
                    "`anet mcp --print-config` prints the block to put in the host's "
                    "configuration.")]


@hookimpl
def anet_mcp_tools() -> list[McpTool]:
    from anet_mcp.operator import operator_tools
    from anet_mcp.requester import requester_tools

    return [*requester_tools(), *operator_tools()]
