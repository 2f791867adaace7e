"""Pages of remote agents against a real hub: the node's own entry never costs a page entry."""

from __future__ import annotations

import pytest

from anet_core.link.contract import QUERY_REFUSALS, HubError, SearchQuery, search_remote
from tests.support.waiting import eventually


async def test_every_page_is_full_and_the_node_is_never_listed(hub, nodes) -> None:
    names = ["alice", "bob", "carol", "dave"]
    clients = {name: await nodes.connect(name, hub) for name in names}
    every = {nodes.identity(name).aid for name in names}

    async def all_listed() -> bool:  # each node's card arrives just after it registered
        page = await clients["alice"].search(SearchQuery(limit=10))
        return {peer.aid for peer in page.peers} == every

    await eventually(all_listed, "every node is in the directory")
    for name, client in clients.items():
        own = nodes.identity(name).aid
        seen, cursor = [], None
        while True:
            page = await search_remote(client, SearchQuery(limit=1, cursor=cursor), own)
            assert len(page.peers) == 1 or not page.next_cursor, (name, page)
            seen += [peer.aid for peer in page.peers]
            cursor = page.next_cursor
            if not cursor:
                break
        assert sorted(seen) == sorted(every - {own}), name
        two = await search_remote(client, SearchQuery(limit=2), own)
        assert len(two.peers) == 2 and own not in {peer.aid for peer in two.peers}


async def test_a_cursor_the_hub_did_not_make_is_the_callers_mistake(hub, nodes) -> None:
    client = await nodes.connect("alice", hub)
    for cursor in ("garbage", "x" * 600):
        with pytest.raises(HubError) as caught:
            await search_remote(client, SearchQuery(cursor=cursor), nodes.identity("alice").aid)
        assert caught.value.reason in QUERY_REFUSALS
