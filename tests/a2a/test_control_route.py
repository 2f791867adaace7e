"""``GET /a2a/endpoint`` on the control plane: where the local endpoint is, and the token's file
(never the token), through the real control plane and the CLI's control client."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

import anet_a2a.plugin
from anet_a2a import AGENTS_PATH
from anet_a2a.server import local_a2a
from anet_a2a.state import StateDir
from anet_core.control.client import ControlClient
from anet_core.control.server import control_plane
from anet_core.errors import AnetError
from anet_core.node import Node
from anet_core.plugins import make_plugins
from tests.support.fakes import FakeHub
from tests.support.nodes import open_node


@asynccontextmanager
async def node_with_a2a_routes(tmp_path: Path) -> AsyncIterator[Node]:
    plugins = make_plugins(load_entry_points=False)
    plugins.pm.register(anet_a2a.plugin, name="a2a")
    async with open_node(tmp_path / "a", FakeHub(), plugins=plugins) as node:
        yield node


async def test_the_route_names_the_endpoint_and_the_token_file(tmp_path: Path) -> None:
    async with node_with_a2a_routes(tmp_path) as node, local_a2a(node), control_plane(node):
        state = StateDir.of(node.paths)
        client = ControlClient(node.paths, timeout=10)
        found = await asyncio.to_thread(client.get, "/a2a/endpoint")
        raw = await asyncio.to_thread(client.request, "GET", "/a2a/endpoint")
    assert found == {"url": f"http://{state.address_file.read_text().strip()}",
                     "agentsPath": AGENTS_PATH, "tokenFile": str(state.token_file)}
    assert state.token_file.read_text().strip() not in str(raw)


async def test_the_route_refuses_as_one_error_while_the_interface_is_not_up(
        tmp_path: Path) -> None:
    async with node_with_a2a_routes(tmp_path) as node, control_plane(node):
        client = ControlClient(node.paths, timeout=10)
        with pytest.raises(AnetError) as refused:
            await asyncio.to_thread(client.get, "/a2a/endpoint")
    assert refused.value.reason == "a2a-not-started"
    assert refused.value.message == "the local A2A interface did not start"
    assert refused.value.hint == "the daemon log says why"
