"""POST /hub/join checks the URL before it touches the hub link: a refused join leaves the node
registered where it was, and status says so."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import aiohttp

from anet_core.link.contract import JoinState, SearchQuery
from anet_hub.app import HubConfig
from tests.support.hubs import RunningHub
from tests.support.nodes import running_node


async def test_a_refused_join_keeps_the_hub(tmp_path: Path) -> None:
    hub = await RunningHub(replace(HubConfig(data_dir=tmp_path / "hub"))).start()
    try:
        async with running_node(tmp_path / "node", hub_url=hub.url) as node:
            address = node.paths.control_addr.read_text().strip()
            token = node.paths.control_token.read_text().strip()
            async with aiohttp.ClientSession(base_url=f"http://{address}", headers={
                    "Authorization": f"Bearer {token}"}) as http:
                for body in ({"url": "nope"}, {"url": ""}, {"url": "   "}, {"url": "ftp://x"}):
                    async with http.post("/hub/join", json=body) as response:
                        assert response.status == 400, body
                    assert node.hub.status.state is JoinState.REGISTERED, body
                async with http.get("/core/status") as response:
                    assert (await response.json())["hub"]["state"] == "registered"
            page = await node.hub.search(SearchQuery())
            assert node.aid in {peer.aid for peer in page.peers}  # the link still works
    finally:
        await hub.stop()
