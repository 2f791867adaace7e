"""The backends module counts forwards and failures per backend in the node's metrics."""

from __future__ import annotations

import pytest

pytest.importorskip("anet_backends")

from anet_backends.forward import FAILED, FORWARDED
from anet_backends.service import Backends
from anet_core.metrics import NodeMetrics


def test_forwards_and_failures_are_counted_per_backend() -> None:
    metrics = NodeMetrics()
    count = Backends.counting(metrics)
    for kind, backend in ((FORWARDED, "*"), (FORWARDED, "*"), (FORWARDED, "chat"),
                          (FAILED, "chat"), ("task.resumed", "*")):
        count(kind, backend)
    text = metrics.exposition().decode()
    assert 'anet_backends_forwards_total{backend="*"} 2.0' in text
    assert 'anet_backends_forwards_total{backend="chat"} 1.0' in text
    assert 'anet_backends_failures_total{backend="chat"} 1.0' in text
    assert 'anet_backends_failures_total{backend="*"}' not in text
