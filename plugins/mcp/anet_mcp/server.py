"""The MCP server: the tools of every module, their arguments checked, their errors presented
as tool errors a model can act on, progress sent while a tool waits.

MCP: https://modelcontextprotocol.io/specification (tools, progress, cancellation). A call
the host cancels is cancelled here (the SDK cancels the handler); nothing remote is touched
unless the tool itself was ``cancel_task``.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

import mcp.types as types
from mcp.server.lowlevel import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError
from pydantic import ValidationError

from anet_core.api import AnetError, AsyncControlClient, DataPaths, McpCall, McpTool, Plugins

log = logging.getLogger(__name__)

OWN_MODULE = "mcp"

INSTRUCTIONS = """\
The tools of an anet node: this machine's member of an agent network. find_agents searches the
network's directory; send_task sends an agent (by its AID) a text task and waits for the answer,
reporting progress; get_task and list_tasks read tasks. Tasks other agents sent to this node
wait in list_inbox until reply_task answers or reject_task declines them. Task metadata:
anet.receipt_verified is true when the agent's signed receipt of the result verified;
anet.reason says why a task was refused, failed or waits; anet.effect_status whether the agent
can have acted. Sending, replying, cancelling and trusting act on other parties: ask the user
first."""

TOOL_HINTS = {
    "task-not-found": "list_tasks shows the tasks this node sent, list_inbox the tasks that "
                      "wait for you",
    "unknown-agent": "find_agents lists the agents and their AIDs",
    "invalid-aid": "find_agents lists the agents and their AIDs",
}
"""The daemon's hints name CLI commands; a model acts on tool names."""


def collect_tools(plugins: Plugins) -> dict[str, McpTool]:
    """Every module's tools, the node's own (module mcp) first. Two tools of one name stop
    ``anet mcp`` with an error naming both modules, as any two records claiming one thing."""
    tools = plugins.collect("anet_mcp_tools", unique=lambda tool: [f"the MCP tool {tool.name}"])
    return {tool.name: tool for tool in sorted(tools, key=lambda tool: tool.module != OWN_MODULE)}


def _listing(tool: McpTool) -> types.Tool:
    return types.Tool(
        name=tool.name, title=tool.title or None, description=tool.description,
        input_schema=tool.arguments.model_json_schema(by_alias=True),
        annotations=types.ToolAnnotations(
            title=tool.title or None, read_only_hint=tool.read_only,
            destructive_hint=None if tool.read_only else tool.destructive,
            idempotent_hint=None if tool.read_only else tool.idempotent,
            open_world_hint=tool.open_world))


def _kind(spec: dict[str, Any]) -> str:
    if "enum" in spec:
        return "|".join(map(str, spec["enum"]))
    kind = str(spec.get("type", "value"))
    if "minimum" in spec and "maximum" in spec:
        kind += f" {spec['minimum']}-{spec['maximum']}"
    return kind


def _signature(tool: McpTool) -> str:
    """``aid (string, required), wait (boolean)``: what the tool takes, for a hint."""
    schema = tool.arguments.model_json_schema(by_alias=True)
    required = set(schema.get("required", []))
    parts = []
    for name, spec in schema.get("properties", {}).items():
        kinds = [_kind(choice) for choice in spec.get("anyOf", [spec])
                 if choice.get("type") != "null"]
        parts.append(f"{name} ({', '.join(kinds)}" + (", required)" if name in required else ")"))
    return ", ".join(parts) or "no arguments"


def invalid_arguments(tool: McpTool, error: ValidationError) -> AnetError:
    """One sentence per wrong argument, naming it and the value given."""
    problems = []
    for item in error.errors():
        where = ".".join(str(part) for part in item["loc"]) or "arguments"
        given = repr(item.get("input"))
        given = given if len(given) <= 80 else given[:77] + "..."
        message = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            problems.append(f"{tool.name} has no argument {where!r}")
        elif item["type"] == "missing":
            problems.append(f"the argument {where!r} is missing")
        elif item["type"] == "model_type":
            problems.append(f"the arguments are {given}, not an object")
        else:
            problems.append(f"the argument {where!r} is {given}: {message}")
    return AnetError("invalid-arguments", "; ".join(problems),
                     hint=f"{tool.name} takes {_signature(tool)}")


def error_result(error: AnetError) -> types.CallToolResult:
    if error.reason in TOOL_HINTS:
        error = AnetError(error.reason, error.message, hint=TOOL_HINTS[error.reason],
                          detail=error.detail)
    return types.CallToolResult(content=[types.TextContent(type="text", text=error.render())],
                                structured_content=error.as_dict(), is_error=True)


def _reporter(ctx: Any) -> Callable[[str], Awaitable[None]]:
    """Progress notifications for one call; the SDK drops them when the host asked for none."""
    sent = 0

    async def progress(message: str) -> None:
        nonlocal sent
        sent += 1
        await ctx.session.report_progress(sent, None, message)

    return progress


def build_server(tools: dict[str, McpTool], control: AsyncControlClient, *,
                 version: str) -> Server:
    listed = [_listing(tool) for tool in tools.values()]

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        tool = tools.get(params.name)
        if tool is None:
            raise MCPError(types.INVALID_PARAMS, f"unknown tool {params.name[:80]!r}; the tools "
                           f"are {', '.join(tools)}")
        try:
            arguments = tool.arguments.model_validate(params.arguments or {})
        except ValidationError as error:
            return error_result(invalid_arguments(tool, error))
        try:
            result = await tool.run(arguments, McpCall(control=control,
                                                       progress=_reporter(ctx)))
        except AnetError as error:
            log.info("event=tool-refused tool=%s reason=%s", tool.name, error.reason)
            return error_result(error)
        except Exception as error:  # a failing tool must not end the server
            log.exception("event=tool-failed tool=%s module=%s", tool.name, tool.module)
            return error_result(AnetError(
                "tool-failed", f"{tool.name} failed: {type(error).__name__}: {error}",
                hint="the standard error of `anet mcp` (the host's log of this server) has "
                     "the details"))
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=result.text)],
            structured_content=result.data)

    return Server("anet", version=version, title="anet node", instructions=INSTRUCTIONS,
                  on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_stdio(tools: dict[str, McpTool], paths: DataPaths, *, version: str) -> None:
    """Serve until the host closes standard input. While serving, standard output carries the
    protocol only (the SDK points file descriptor 1 at standard error for everything else)."""
    async with AsyncControlClient(paths) as control:
        server = build_server(tools, control, version=version)
        async with stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
