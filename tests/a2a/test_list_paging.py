"""The list route: a query the hub refuses is the client's mistake (400), not the node's."""

from __future__ import annotations

from anet_core.link.contract import HubError
from tests.a2a.local import Local


async def test_bad_cursor_is_invalid_argument(local: Local, http, monkeypatch) -> None:
    async def refuse(query):
        raise HubError("bad-cursor", "the cursor was not made by this hub; start without one")

    monkeypatch.setattr(local.node.hub, "search", refuse)
    async with http.get(local.base + "/a2a/v1/agents", params={"cursor": "nope"},
                        headers=local.headers()) as response:
        assert response.status == 400
        error = (await response.json())["error"]
        assert error["status"] == "INVALID_ARGUMENT" and "cursor" in error["message"]

    async def unreachable(query):
        raise HubError("hub-unreachable", "the hub is down")

    monkeypatch.setattr(local.node.hub, "search", unreachable)
    async with http.get(local.base + "/a2a/v1/agents", headers=local.headers()) as response:
        assert response.status == 503


async def test_lists_are_kept_and_a_busy_hub_gets_the_last_page(local: Local, http,
                                                                monkeypatch) -> None:
    from anet_a2a import directory

    asked = []
    search = local.node.hub.search

    async def counted(query):
        asked.append(query)
        return await search(query)

    monkeypatch.setattr(local.node.hub, "search", counted)
    url = local.base + "/a2a/v1/agents"
    for _ in range(3):
        async with http.get(url, headers=local.headers()) as response:
            assert response.status == 200
            first = await response.json()
    assert len(asked) == 1 and "anet.stale" not in first  # asked again at once: kept
    assert first["anet.hub"]["state"] == "registered"  # the hub link, as `anet status` says
    monkeypatch.setattr(directory, "PAGE_FRESH_S", 0.0)

    async def busy(query):
        raise HubError("rate-limited", "more than 50 requests/s")

    monkeypatch.setattr(local.node.hub, "search", busy)
    async with http.get(url, headers=local.headers()) as response:
        assert response.status == 200
        kept = await response.json()
    assert kept["agents"] == first["agents"] and kept["anet.stale"] is True
    monkeypatch.setattr(directory, "PAGE_KEPT_S", 0.0)
    async with http.get(url, headers=local.headers()) as response:
        assert response.status == 503  # too old to stand in for the directory
