"""The meters (plain numbers until a scrape) write exactly what prometheus-client's own metric
objects write for the same counts: prometheus-client is the oracle."""

from __future__ import annotations

import re

import prometheus_client
import pytest

from anet_core.util.meters import Meters

BUCKETS = (0.01, 0.1, 1.0, 10.0)


def without_created(text: str) -> str:
    """The exposition with the ``_created`` timestamps (the clock at creation) blanked."""
    return re.sub(r"^(\S*_created(?:\{[^}]*\})?) \S+$", r"\1 T", text, flags=re.MULTILINE)


def test_the_exposition_is_prometheus_clients_own() -> None:
    registry = prometheus_client.CollectorRegistry(auto_describe=True)
    sent = prometheus_client.Counter("anet_x_sent", "Envelopes sent", registry=registry)
    refused = prometheus_client.Counter("anet_x_refused", "Refusals by reason", ["reason"],
                                        registry=registry)
    unused = prometheus_client.Counter("anet_x_unused", "Never counted", ["backend"],
                                       registry=registry)
    connected = prometheus_client.Gauge("anet_x_connected", "Connected nodes",
                                        registry=registry)
    queued = prometheus_client.Gauge("anet_x_queued", "Queued", registry=registry)
    latency = prometheus_client.Histogram("anet_x_latency_seconds", "Latency", buckets=BUCKETS,
                                          registry=registry)

    meters = Meters()
    ours_sent = meters.counter("anet_x_sent", "Envelopes sent")
    ours_refused = meters.counter("anet_x_refused", "Refusals by reason", ["reason"])
    ours_unused = meters.counter("anet_x_unused", "Never counted", ["backend"])
    ours_connected = meters.gauge("anet_x_connected", "Connected nodes")
    ours_queued = meters.gauge("anet_x_queued", "Queued")
    ours_latency = meters.histogram("anet_x_latency_seconds", "Latency", BUCKETS)

    for counter in (sent, ours_sent):
        counter.inc()
        counter.inc(2.5)
    for counter in (refused, ours_refused):
        counter.labels("unknown-recipient").inc()
        counter.labels("rate").inc(3)
    assert unused is not None and ours_unused is not None
    connected.set_function(lambda: 7)
    ours_connected.set_function(lambda: 7)
    queued.set(4)
    ours_queued.set(4)
    for value in (0.005, 0.01, 0.5, 3.0, 99.0):
        latency.observe(value)
        ours_latency.observe(value)

    expected = prometheus_client.generate_latest(registry).decode()
    assert without_created(meters.exposition().decode()) == without_created(expected)
    assert 'anet_x_latency_seconds_bucket{le="+Inf"} 5.0' in expected
    assert meters.content_type() == prometheus_client.exposition.CONTENT_TYPE_LATEST


def test_a_gauge_with_labels_is_read_at_each_scrape() -> None:
    meters = Meters()
    rows = [(("provider", "TASK_STATE_COMPLETED"), 2.0)]
    meters.gauge("anet_x_tasks", "Tasks by role and state", ["role", "state"],
                 read=lambda: iter(rows))
    assert 'anet_x_tasks{role="provider",state="TASK_STATE_COMPLETED"} 2.0' in \
        meters.exposition().decode()
    rows[0] = (("provider", "TASK_STATE_COMPLETED"), 3.0)
    assert 'state="TASK_STATE_COMPLETED"} 3.0' in meters.exposition().decode()


def test_misuse_is_refused_with_the_meters_name() -> None:
    meters = Meters()
    counter = meters.counter("anet_x_sent", "Sent")
    labelled = meters.counter("anet_x_refused", "Refused", ["reason"])
    with pytest.raises(ValueError, match="already named anet_x_sent"):
        meters.counter("anet_x_sent", "Sent again")
    with pytest.raises(ValueError, match="no Prometheus metric name"):
        meters.counter("anet-x", "Dashes")
    with pytest.raises(ValueError, match="goes up"):
        counter.inc(-1)
    with pytest.raises(ValueError, match=r"counts by reason: count with \.labels"):
        labelled.inc()
    with pytest.raises(ValueError, match=r"has the labels \['reason'\], got 2 values"):
        labelled.labels("a", "b")
    with pytest.raises(ValueError, match="give it read="):
        meters.gauge("anet_x_tasks", "Tasks", ["role"])
