"""The node's Prometheus metrics, served on the control plane at ``GET /metrics/`` (control token).

Names follow https://prometheus.io/docs/practices/naming/. The core counts the envelopes it hands
to the hub and receives from it, and reads tasks by role and state and the outbox depth from the
store at each scrape; a module adds its own counters with :meth:`NodeMetrics.counter` (the
backends module counts forwards and failures per backend). Counters start at zero with the
daemon. They are plain numbers until a scrape (``anet_core.util.meters``).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from anet_core.util.meters import Counter, Meters

if TYPE_CHECKING:
    from anet_core.store import Store


class NodeMetrics:
    def __init__(self) -> None:
        self.meters = Meters()
        self.envelopes_sent = self.meters.counter("anet_node_envelopes_sent",
                                                  "Envelopes the hub took from this node")
        self.envelopes_received = self.meters.counter("anet_node_envelopes_received",
                                                      "Envelopes the hub delivered to this node")

    def follow_store(self, store: Store) -> None:
        """Read at scrape time: the store is the truth, nothing is kept twice."""
        self.meters.gauge("anet_node_tasks", "Tasks in the store by role and state",
                          ["role", "state"],
                          read=lambda: (((role, state), count)
                                        for role, state, count in store.count_tasks()))
        self.meters.gauge("anet_node_outbox_depth",
                          "Task messages waiting for the hub to take them",
                          read=store.outbox_depth)

    def counter(self, name: str, documentation: str, labels: Sequence[str] = (), *,
                module: str) -> Counter:
        """A counter of ``module``, named ``anet_<module>_<name>`` (``_total`` is added)."""
        return self.meters.counter(f"anet_{module}_{name}", documentation, labels)

    def exposition(self) -> bytes:
        return self.meters.exposition()
