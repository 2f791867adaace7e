"""Extension activation on the local endpoint: both header spellings, a module's extension by
any of its URIs, the answer naming what was activated, and the activated URIs travelling in the
message's ``extensions``."""

from __future__ import annotations

from pathlib import Path

import pytest

from anet_core import hookimpl
from anet_core.records import CardExtension
from tests.a2a.local import two_nodes
from tests.support.waiting import eventually

EMITTED = "https://github.com/google-a2a/a2a-x402/v0.1"
ALSO = "https://github.com/google-agentic-commerce/a2a-x402/blob/main/spec/v0.2"
PREVIEW = "urn:anet:a2a:preview/v1"


class Declares:
    @hookimpl
    def anet_card_extensions(self, node, peer):
        return [CardExtension(module="x402", uri=EMITTED, also_activated_by=(ALSO,))]


def send_body(message_id: str) -> dict:
    return {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {
        "message": {"role": "ROLE_USER", "messageId": message_id, "parts": [{"text": "hi"}]},
        "configuration": {"returnImmediately": True}}}


@pytest.mark.parametrize(("header", "requested", "activated"), [
    ("A2A-Extensions", f"{EMITTED}, urn:unknown", f"{EMITTED}"),
    ("X-A2A-Extensions", ALSO, ALSO),
    ("A2A-Extensions", f"{PREVIEW},{ALSO}", f"{ALSO}, {PREVIEW}"),
])
async def test_activation_is_named_in_the_answer(tmp_path: Path, http, header: str,
                                                 requested: str, activated: str) -> None:
    async with two_nodes(tmp_path) as local:
        local.node.plugins.pm.register(Declares(), name="declares")
        async with http.post(f"{local.agent_url()}/jsonrpc", json=send_body("m-act"),
                             headers=local.headers(**{header: requested})) as r:
            assert r.status == 200
            assert r.headers[header] == activated
            task = (await r.json())["result"]["task"]
        seen = await eventually(lambda: local.agent.seen)
    assert sorted(seen[0].message["extensions"]) == sorted(activated.split(", "))
    assert task["history"][0]["extensions"] == seen[0].message["extensions"]


async def test_nothing_activated_names_nothing(tmp_path: Path, http) -> None:
    async with two_nodes(tmp_path) as local:  # no module declares the x402 extension
        async with http.post(f"{local.agent_url()}/jsonrpc", json=send_body("m-none"),
                             headers=local.headers(**{"A2A-Extensions": EMITTED})) as r:
            assert "A2A-Extensions" not in r.headers
        seen = await eventually(lambda: local.agent.seen)
    assert "extensions" not in seen[0].message
