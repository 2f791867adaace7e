"""The hub's Prometheus metrics, one registry per hub application (``GET /metrics``).

Names follow https://prometheus.io/docs/practices/naming/: ``anet_hub_`` and a unit suffix.
Counters count since the instance started; sum them over the instances of a cluster.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.exposition import CONTENT_TYPE_LATEST

RELAY_LATENCY_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                           5.0, 10.0, 30.0, 60.0, 300.0, 3600.0)
"""From a few milliseconds (both nodes online) to an hour (a recipient that was offline)."""

CONTENT_TYPE = CONTENT_TYPE_LATEST


@dataclass
class HubMetrics:
    registry: CollectorRegistry = field(
        default_factory=lambda: CollectorRegistry(auto_describe=True))

    def __post_init__(self) -> None:
        registry = self.registry
        self.connected = Gauge("anet_hub_connected_nodes",
                               "Registered nodes connected to this instance", registry=registry)
        self.queued = Gauge("anet_hub_envelopes_queued",
                            "Envelopes stored and not yet acknowledged, in the whole hub "
                            "(read from storage at each scrape)", registry=registry)
        self.relayed = Counter("anet_hub_envelopes_relayed",
                               "Envelopes accepted from senders at this instance",
                               registry=registry)
        self.delivered = Counter("anet_hub_envelopes_delivered",
                                 "Envelopes acknowledged by their recipients at this instance",
                                 registry=registry)
        self.refused = Counter("anet_hub_requests_refused",
                               "Requests refused, by the reason told to the node",
                               ["reason"], registry=registry)
        self.latency = Histogram("anet_hub_relay_latency_seconds",
                                 "From an envelope's acceptance to its recipient's "
                                 "acknowledgement", buckets=RELAY_LATENCY_BUCKETS_S,
                                 registry=registry)
        self.storage_errors = Counter("anet_hub_storage_errors",
                                      "Storage operations that failed", registry=registry)
        self.broker_errors = Counter("anet_hub_broker_errors",
                                     "Broker operations that failed or connection losses",
                                     registry=registry)

    def follow_connections(self, count: Callable[[], int]) -> None:
        self.connected.set_function(count)

    def follow_broker(self, connected: Callable[[], bool]) -> None:
        """Only an instance with a broker has the gauge ``anet_hub_broker_connected``."""
        gauge = Gauge("anet_hub_broker_connected",
                      "1 while this instance is connected to its broker", registry=self.registry)
        gauge.set_function(lambda: float(connected()))

    def exposition(self) -> bytes:
        return generate_latest(self.registry)
