"""``/tasks/keys/rotate``: the control route of ``anet keys rotate`` while the daemon runs
(the command is in anet_core.builtins.identity_cli)."""

from __future__ import annotations

import asyncio

from aiohttp import web

from anet_core.control.parsing import RequestBody, read_body
from anet_core.node import NODE_KEY, Node

routes = web.RouteTableDef()


class RotateRequest(RequestBody):
    emergency: bool = False


@routes.post("/keys/rotate")
async def rotate(request: web.Request) -> web.Response:
    body = await read_body(request, RotateRequest)
    node: Node = request.config_dict[NODE_KEY]
    history = await asyncio.to_thread(node.identity.rotate, body.emergency)
    notes = node.plugins.after_key_rotation(node.paths, node.identity, body.emergency)
    # The hub takes a new key history at registration; the card follows, signed anew.
    await node.hub.reregister()
    return web.json_response({"aid": node.aid, "keySeq": history.key_seq,
                              "emergency": body.emergency, "notes": notes})
