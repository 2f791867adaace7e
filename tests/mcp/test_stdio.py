"""`anet mcp` on its own: the host configuration it prints, standard output carrying nothing
but the protocol, and tool errors while the daemon is not running."""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path

from mcp import ClientSession, StdioServerParameters, stdio_client

from tests.mcp.conftest import Tools, mcp_tools
from tests.support.processes import ANET, REPO, NodeDir
from tests.support.waiting import STEP_TIMEOUT_S


async def test_stdout_carries_only_the_protocol_and_bad_lines_do_not_stop_the_server(
        tmp_path: Path) -> None:
    requests = [
        "this is not JSON",
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "raw", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call",
         "params": {"name": "get_task", "arguments": {"taskId": "abcdefgh12"}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
         "params": {"name": "send_task", "arguments": "not an object"}},
        '{"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {',
        {"jsonrpc": "2.0", "id": 5, "method": "tools/call",
         "params": {"name": "send_task", "arguments": {"aid": 5, "text": "x"}}},
    ]
    with open(tmp_path / "stderr", "w") as stderr:
        server = await asyncio.create_subprocess_exec(
            *ANET, "mcp", stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=stderr, cwd=REPO, env={**os.environ, "ANET_DATA_DIR": str(tmp_path / "none")})
    assert server.stdin is not None and server.stdout is not None
    server.stdin.write("".join((item if isinstance(item, str) else json.dumps(item)) + "\n"
                               for item in requests).encode())
    answers: dict[object, dict] = {}
    try:
        async with asyncio.timeout(STEP_TIMEOUT_S):
            # Every line is a JSON-RPC message; the server closes in-flight calls on EOF, so
            # standard input stays open until each answer is in.
            while not {1, 2, 3, 5} <= set(answers):
                answer = json.loads(await server.stdout.readline())
                assert answer["jsonrpc"] == "2.0", answer
                answers[answer.get("id")] = answer
            server.stdin.close()
            assert await server.stdout.read() == b""
            assert await server.wait() == 0
    finally:
        if server.returncode is None:
            server.kill()
            await server.wait()
    assert answers[1]["result"]["serverInfo"]["name"] == "anet"
    not_running = answers[2]["result"]
    assert not_running["isError"] is True
    assert not_running["structuredContent"]["error"] == "daemon-not-running"
    assert str(tmp_path / "none") in not_running["structuredContent"]["message"]
    assert "anet up" in not_running["structuredContent"]["hint"]
    assert "error" in answers[3]  # arguments that are no object: the request itself is invalid
    assert answers[5]["result"]["isError"] is True  # answered after the broken lines
    assert "the argument 'aid' is 5" in answers[5]["result"]["structuredContent"]["message"]


async def test_the_printed_host_config_starts_a_working_server(tmp_path: Path) -> None:
    node = NodeDir(tmp_path / "carol")
    node.run("init")
    printed = json.loads(node.run("mcp", "--print-config", "--name", "carol").stdout)
    entry = printed["mcpServers"]["carol"]
    assert Path(entry["command"]).is_absolute() and Path(entry["command"]).exists()
    assert entry["args"][-1] == "mcp"
    assert entry["env"] == {"ANET_DATA_DIR": str(node.root)}
    parameters = StdioServerParameters(command=entry["command"], args=entry["args"],
                                       env=entry["env"])
    with open(tmp_path / "stderr", "w") as errlog:
        async with stdio_client(parameters, errlog=errlog) as streams, \
                ClientSession(*streams, read_timeout_seconds=STEP_TIMEOUT_S) as session:
            await session.initialize()
            status = await session.call_tool("node_status", {})
    assert not status.is_error
    assert status.structured_content == {"running": False, "dataDir": str(node.root),
                                         "hint": "start it with `anet up`"}
    assert "anet up" in status.content[0].text


async def test_every_tool_needs_the_daemon_and_says_how_to_start_it(tmp_path: Path) -> None:
    node = NodeDir(tmp_path / "dave")
    node.run("init")
    async with mcp_tools(node.root, tmp_path / "stderr") as tools:
        for name, arguments in (("find_agents", {}), ("send_task", {"aid": "b" * 32,
                                                                    "text": "hi"}),
                                ("list_inbox", {}), ("trust_agent", {"aid": "b" * 32})):
            await assert_not_running(tools, name, arguments, node.root)


async def assert_not_running(tools: Tools, name: str, arguments: dict, root: Path) -> None:
    result = await tools.call(name, arguments)
    assert result.is_error, name
    assert result.structured_content["error"] == "daemon-not-running"
    assert str(root) in result.structured_content["message"]
    assert result.structured_content["hint"] == "start it with `anet up`"
