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
