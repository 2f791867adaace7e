"""The extended card: asked for over the hub, signed by the agent, given when the agent charges
or trusts the requester, and shown by the requester's local A2A endpoint (GetExtendedAgentCard).
A real hub and two real nodes."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import aiohttp
import pytest

from anet_core.identity import verify_document
from anet_core.protocol.amounts import rail_network
from anet_core.tasks import TaskError
from tests.support.hubs import RunningHub
from tests.x402.payee import SKILL, alice_and_bob

pytestmark = pytest.mark.timeout(90)


async def test_an_agent_that_charges_gives_its_signed_prices(tmp_path: Path,
                                                             hub: RunningHub) -> None:
    async with alice_and_bob(tmp_path, hub.url) as pair:
        pair.bob.tasks.distrust(pair.alice.aid)  # it charges: anyone may ask
        card = await pair.alice.tasks.extended_card(pair.bob.aid)
        content = verify_document(card, pair.bob.identity.verified_history)
        assert content["type"] == "anet.extended-card/v1"
        assert (content["agent"], content["requester"]) == (pair.bob.aid, pair.alice.aid)
        assert content["prices"] == {SKILL: {
            "amount": "0.05", "asset": "USD", "networks": [rail_network(hub.state.identity.aid)]}}


async def test_a_free_agent_gives_it_to_agents_it_trusts_only(tmp_path: Path,
                                                              hub: RunningHub) -> None:
    async with alice_and_bob(tmp_path, hub.url, prices={}) as pair:
        pair.bob.tasks.distrust(pair.alice.aid)
        with pytest.raises(TaskError) as refused:
            await pair.alice.tasks.extended_card(pair.bob.aid)
        assert refused.value.reason == "card-refused"
        assert "trusts" in refused.value.message
        pair.bob.tasks.trust(pair.alice.aid)
        card = await pair.alice.tasks.extended_card(pair.bob.aid)
        assert verify_document(card, pair.bob.identity.verified_history)["prices"] == {}


async def test_the_local_endpoint_shows_the_prices_on_the_extended_card(
        tmp_path: Path, hub: RunningHub) -> None:
    pytest.importorskip("anet_a2a")
    from anet_a2a.server import local_a2a
    from anet_a2a.state import StateDir

    async with alice_and_bob(tmp_path, hub.url) as pair, local_a2a(pair.alice):
        state = StateDir.of(pair.alice.paths)
        base = f"http://{state.address_file.read_text().strip()}/a2a/v1/agents/{pair.bob.aid}"
        headers = {"Authorization": f"Bearer {state.token_file.read_text().strip()}",
                   "A2A-Version": "1.0"}
        async with aiohttp.ClientSession(headers=headers) as http:
            async with http.get(f"{base}/rest/extendedAgentCard") as response:
                assert response.status == 200, await response.text()
                extended = await response.json()
            async with http.get(f"{base}/.well-known/agent-card.json") as response:
                public = await response.json()
    prices = [extension for extension in extended["capabilities"]["extensions"]
              if extension["uri"] == "urn:anet:a2a:anet-prices/v1"]
    assert [extension["params"]["prices"] for extension in prices] == [
        {SKILL: {"amount": "0.05", "asset": "USD",
                 "networks": [rail_network(hub.state.identity.aid)]}}]
    signed = json.loads(base64.urlsafe_b64decode(
        prices[0]["params"]["extendedCard"] + "=" * (-len(prices[0]["params"]["extendedCard"])
                                                     % 4)))
    assert verify_document(signed, pair.bob.identity.verified_history)["requester"] == \
        pair.alice.aid
    assert all(extension["uri"] != "urn:anet:a2a:anet-prices/v1"
               for extension in public["capabilities"]["extensions"])
    assert extended["signatures"]  # signed again by alice's node with the extension
