"""The hub's Prometheus metrics, one set per hub application (``GET /metrics``).

Names follow https://prometheus.io/docs/practices/naming/: ``anet_hub_`` and a unit suffix.
Counters count since the instance started; sum them over the instances of a cluster. They are
plain numbers until a scrape (``Meters`` in ``anet_core.api``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from anet_core.api import Meters

RELAY_LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                           5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)
"""From a few milliseconds (both nodes online) to an hour (a recipient that was offline)."""


@dataclass
class HubMetrics:
    meters: Meters = field(default_factory=Meters)

    def __post_init__(self) -> None:
        meters = self.meters
        self.connected = meters.gauge("anet_hub_connected_nodes",
                                      "Registered nodes connected to this instance")
        self.queued = meters.gauge("anet_hub_envelopes_queued",
                                   "Envelopes stored and not yet acknowledged, in the whole hub "
                                   "(read from storage at each scrape)")
        self.relayed = meters.counter("anet_hub_envelopes_relayed",
                                      "Envelopes accepted from senders at this instance")
        self.delivered = meters.counter("anet_hub_envelopes_delivered",
                                        "Envelopes acknowledged by their recipients at this "
                                        "instance")
        self.refused = meters.counter("anet_hub_requests_refused",
                                      "Requests refused, by the reason told to the node",
                                      ["reason"])
        self.latency = meters.histogram("anet_hub_relay_latency_seconds",
                                        "From an envelope's acceptance to its recipient's "
                                        "acknowledgement", RELAY_LATENCY_BUCKETS_S)
        self.storage_errors = meters.counter("anet_hub_storage_errors",
                                             "Storage operations that failed, by operation "
                                             "(the storage method, ledger.<method> for the "
                                             "rail's ledger)", ["operation"])
        self.broker_errors = meters.counter("anet_hub_broker_errors",
                                            "Broker operations that failed or connection losses")

    def follow_connections(self, count: Callable[[], int]) -> None:
        self.connected.set_function(count)

    def follow_broker(self, connected: Callable[[], bool]) -> None:
        """Only an instance with a broker has the gauge ``anet_hub_broker_connected``."""
        self.meters.gauge("anet_hub_broker_connected",
                          "1 while this instance is connected to its broker",
                          read=lambda: float(connected()))

    def exposition(self) -> bytes:
        return self.meters.exposition()
