"""A real hub, two real daemons, and `anet mcp` as a real subprocess spoken to by the official
MCP client (`mcp.ClientSession` over `stdio_client`)."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("anet_mcp")

from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.types import CallToolResult

from tests.support.processes import REPO, HubProcess, NodeDir, hub_and_nodes
from tests.support.waiting import STEP_TIMEOUT_S


@dataclass
class Network:
    hub: HubProcess
    alice: NodeDir
    bob: NodeDir


@pytest.fixture(scope="module")
def network(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Network]:
    """Hub, alice and bob, registered; bob trusts alice; shared by the tests of a module.
    Without the module a2a: MCP needs only the control plane."""
    with hub_and_nodes(tmp_path_factory.mktemp("network"), "alice", "bob") as (
            hub, (alice, bob)):
        bob.run("trust", "add", alice.aid)
        yield Network(hub, alice, bob)


def server_parameters(data_dir: Path, disabled: str = "a2a") -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable, args=["-m", "anet_core.cli.main", "mcp"], cwd=REPO,
        env={"ANET_DATA_DIR": str(data_dir), "ANET_DISABLE_MODULES": disabled})


@dataclass
class Tools:
    """One MCP session with `anet mcp` for a node; ``progress`` collects every notification."""

    session: ClientSession
    progress: list[str] = field(default_factory=list)

    async def call(self, name: str, arguments: dict[str, Any] | None = None, *,
                   timeout: float = STEP_TIMEOUT_S) -> CallToolResult:
        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            self.progress.append(message or "")

        return await self.session.call_tool(name, arguments or {}, read_timeout_seconds=timeout,
                                            progress_callback=on_progress)

    async def ok(self, name: str, arguments: dict[str, Any] | None = None, *,
                 timeout: float = STEP_TIMEOUT_S) -> CallToolResult:
        result = await self.call(name, arguments, timeout=timeout)
        assert not result.is_error, result.content[0].text
        return result


@asynccontextmanager
async def mcp_tools(data_dir: Path, stderr: Path) -> AsyncIterator[Tools]:
    """`anet mcp` for ``data_dir``, its standard error kept in ``stderr``."""
    with open(stderr, "a") as errlog:
        async with stdio_client(server_parameters(data_dir), errlog=errlog) as streams, \
                ClientSession(*streams, read_timeout_seconds=STEP_TIMEOUT_S) as session:
            await session.initialize()
            yield Tools(session)
