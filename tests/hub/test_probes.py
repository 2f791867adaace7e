"""Health, readiness and metrics of one embedded hub (SQLite); the cluster's are in
test_cluster.py, with their broker and a PostgreSQL that goes away."""

from __future__ import annotations

from anet_core.protocol.envelope import seal
from tests.support.waiting import eventually


def sample(text: str, line_start: str) -> float:
    [value] = [float(line.split()[-1]) for line in text.splitlines()
               if line.startswith(line_start)]
    return value


async def test_health_readiness_and_metrics(hub, nodes, raw, http, inbox_factory):
    async with http.get(f"{hub.http}/healthz") as response:
        assert response.status == 200 and (await response.json()) == {"status": "ok"}
    async with http.get(f"{hub.http}/readyz") as response:
        ready = await response.json()
    assert response.status == 200 and ready["ready"] is True
    assert [(item["name"], item["ok"]) for item in ready["dependencies"]] == [("storage", True)]
    assert "SQLite" in ready["dependencies"][0]["detail"]

    inbox = inbox_factory()
    await nodes.connect("bob", hub, receiver=inbox)
    alice = await nodes.connect("alice", hub)
    bob, carol = nodes.identity("bob"), nodes.identity("carol")
    for n in range(3):
        await alice.send(seal(nodes.identity("alice"), bob.aid, bob.encryption_public_key,
                              {"n": n}))
    await inbox.wait_for(3)
    await eventually(lambda: not hub.state.relay.connections[bob.aid]._inflight)
    ws = await raw.register(hub, nodes.identity("dave"))
    stranger = seal(nodes.identity("dave"), carol.aid, carol.encryption_public_key, {"n": 0})
    answer = await raw.ask(ws, {"type": "send", "rid": "1", "envelope": stranger})
    assert answer["reason"] == "unknown-recipient"

    async with http.get(f"{hub.http}/metrics") as response:
        assert response.status == 200
        assert response.headers["Content-Type"].startswith("text/plain")
        text = await response.text()
    assert sample(text, "anet_hub_connected_nodes ") == 3
    assert sample(text, "anet_hub_envelopes_relayed_total ") == 3
    assert sample(text, "anet_hub_envelopes_delivered_total ") == 3
    assert sample(text, "anet_hub_relay_latency_seconds_count ") == 3
    assert sample(text, 'anet_hub_requests_refused_total{reason="unknown-recipient"}') == 1
    assert sample(text, "anet_hub_envelopes_queued ") == 0
    assert "# TYPE anet_hub_storage_errors_total counter" in text
    assert "anet_hub_storage_errors_total{" not in text  # nothing failed
    assert "anet_hub_broker_connected" not in text  # no broker: no gauge that says 0

