"""Frames no correct node sends: each is answered with an error frame, the session goes on, and
the hub logs no traceback. The hub's data directory is private."""

from __future__ import annotations

import logging
import os
import stat
from dataclasses import replace
from pathlib import Path

import pytest

from anet_hub.app import HubConfig
from tests.support.hubs import RunningHub

DEEP = "[" * 1000 + "]" * 1000

HOSTILE = [
    DEEP,
    '{"type":"lookup","rid":"r1","aid":' + DEEP + "}",
    '{"type":"search","rid":"r2","q":"\\ud800"}',
    '{"type":"lookup","rid":"\\ud800","aid":"x"}',
    '{"type":"publish","rid":"r3","card":{"name":"\\udc00"}}',
    '{"type":"send","rid":"r4","envelope":{"ct":"\\ud83d"}}',
    '{"type":"review","rid":"r5","review":{"\\ud800":1}}',
    '{"type":"search","rid":"r6","limit":NaN}',
    "not json at all",
]


async def test_hostile_frames_get_an_error_and_the_session_goes_on(
        hub, nodes, raw, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.WARNING)
    bob = nodes.identity("bob")
    ws = await raw.register(hub, bob)
    for text in HOSTILE:
        await ws.send_str(text)
        answer = await ws.receive_json(timeout=10)
        assert answer["type"] == "error" and answer["reason"] == "bad-frame", (text[:60], answer)
        assert not ws.closed
    rids = []
    for text in HOSTILE[2:7]:
        await ws.send_str(text)
        rids.append((await ws.receive_json(timeout=10))["rid"])
    assert rids == ["r2", None, "r3", "r4", "r5"]  # a surrogate rid cannot be echoed
    answer = await raw.ask(ws, {"type": "lookup", "rid": "ok", "aid": bob.aid})
    assert answer["type"] == "entry"
    tracebacks = [record for record in caplog.records if record.exc_info]
    assert not tracebacks, tracebacks[0].getMessage()


async def test_a_hostile_first_frame_is_answered_before_the_hub_closes(hub, raw) -> None:
    ws, _ = await raw.open(hub)
    await ws.send_str(DEEP)
    answer = await ws.receive_json(timeout=10)
    assert answer["reason"] == "bad-frame"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize("existing", [False, True])
async def test_the_hub_data_directory_is_private(tmp_path: Path, existing: bool) -> None:
    data = tmp_path / "hub"
    if existing:
        data.mkdir(mode=0o755)
        os.chmod(data, 0o755)
    hub = await RunningHub(replace(HubConfig(data_dir=data))).start()
    try:
        assert mode(data) == 0o700
        assert (data / "hub.db").exists()
    finally:
        await hub.stop()


def test_every_delivery_the_node_does_not_hand_on_is_logged(
        caplog: pytest.LogCaptureFixture) -> None:
    from anet_core.link.delivery import DeliveryQueue

    caplog.set_level(logging.INFO, logger="anet_core.link.delivery")
    queue = DeliveryQueue()
    envelope = {"id": "e1", "from": "a" * 32}
    assert queue.add(envelope)
    assert not queue.add(envelope) and not queue.add(envelope)
    assert not queue.add({"from": "b" * 32})
    logged = [record.getMessage() for record in caplog.records]
    assert sum("event=delivery-repeated id=e1" in line for line in logged) == 2
    assert any("event=delivery-refused reason=no-id" in line for line in logged)
