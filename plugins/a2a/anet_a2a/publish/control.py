"""Publishing on the control plane (``/a2a/publish``); its commands are in ``publish/commands.py``,
its ``anet doctor`` check (``a2a-publish``) in ``publish/checks.py``."""

from __future__ import annotations

from aiohttp import web

from anet_a2a.publish.cards import CATALOG_PATH
from anet_a2a.publish.server import PUBLISHED
from anet_core.api import NODE_KEY


async def publish_state(request: web.Request) -> web.Response:
    surface = request.config_dict[NODE_KEY].get(PUBLISHED)
    if surface is None:
        return web.json_response({"listening": False})
    state = await surface.aliases.state()
    return web.json_response({
        "listening": True, "baseUrl": surface.base, "catalog": surface.base + CATALOG_PATH,
        "aliases": {name: [skill["id"] for skill in alias.skills]
                    for name, alias in state.published.items()},
        "problems": state.problems})


def routes() -> list[web.RouteDef]:
    return [web.get("/publish", publish_state)]
