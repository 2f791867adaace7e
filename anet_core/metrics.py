"""The node's Prometheus metrics, served on the control plane at ``GET /metrics/`` (control token).

Names follow https://prometheus.io/docs/practices/naming/. The core counts the envelopes it hands
to the hub and receives from it, and reads tasks by role and state and the outbox depth from the
store at each scrape; a module adds its own counters with :meth:`NodeMetrics.counter` (the
backends module counts forwards and failures per backend). Counters start at zero with the
daemon.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_LATEST
from prometheus_client.registry import Collector

if TYPE_CHECKING:
    from anet_core.store import Store

CONTENT_TYPE = CONTENT_TYPE_LATEST


class _StoreCollector(Collector):
    """Read at scrape time: the store is the truth, nothing is kept twice."""

    def __init__(self, store: Store) -> None:
        self._store = store

    def collect(self) -> Iterator[Metric]:
        tasks = GaugeMetricFamily("anet_node_tasks", "Tasks in the store by role and state",
                                  labels=["role", "state"])
        for role, state, count in self._store.count_tasks():
            tasks.add_metric([role, state], count)
        yield tasks
        yield GaugeMetricFamily("anet_node_outbox_depth",
                                "Task messages waiting for the hub to take them",
                                value=self._store.outbox_depth())


class NodeMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self.envelopes_sent = Counter("anet_node_envelopes_sent",
                                      "Envelopes the hub took from this node",
                                      registry=self.registry)
        self.envelopes_received = Counter("anet_node_envelopes_received",
                                          "Envelopes the hub delivered to this node",
                                          registry=self.registry)

    def follow_store(self, store: Store) -> None:
        self.registry.register(_StoreCollector(store))

    def counter(self, name: str, documentation: str, labels: Sequence[str] = (), *,
                module: str) -> Counter:
        """A counter of ``module``, named ``anet_<module>_<name>`` (``_total`` is added)."""
        return Counter(f"anet_{module}_{name}", documentation, list(labels),
                       registry=self.registry)

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
