"""The backends module counts forwards and failures per backend in the node's metrics, and still
records every evidence record it is given."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("anet_backends")

from anet_backends.forward import FAILED, FORWARDED
from anet_backends.service import Backends
from anet_core.metrics import NodeMetrics


async def test_forwards_and_failures_are_counted_per_backend() -> None:
    recorded: list[tuple[str, dict[str, Any]]] = []

    async def record(kind: str, data: dict[str, Any]) -> None:
        recorded.append((kind, data))

    metrics = NodeMetrics()
    counted = Backends.counting(record, metrics)
    for kind, backend in ((FORWARDED, "*"), (FORWARDED, "*"), (FORWARDED, "chat"),
                          (FAILED, "chat"), ("task.resumed", "*")):
        await counted(kind, {"backend": backend})
    text = metrics.exposition().decode()
    assert 'anet_backends_forwards_total{backend="*"} 2.0' in text
    assert 'anet_backends_forwards_total{backend="chat"} 1.0' in text
    assert 'anet_backends_failures_total{backend="chat"} 1.0' in text
    assert 'anet_backends_failures_total{backend="*"}' not in text
    assert [kind for kind, _ in recorded] == [FORWARDED, FORWARDED, FORWARDED, FAILED,
                                              "task.resumed"]
