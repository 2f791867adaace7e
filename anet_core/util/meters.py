"""Counters, gauges and histograms held as plain numbers, written in Prometheus's text format
when scraped.

prometheus-client, the reference implementation of the format, still writes every scrape; but
its own metric objects need the whole package (with its HTTP, WSGI and ASGI servers) in every
process from the start, 1.0 MiB of an idle node or hub (docs/performance.md, "Idle memory").
These meters are numbers until :meth:`Meters.exposition` loads it and hands it their values, so
a scrape reads what prometheus-client's own ``Counter``, ``Gauge`` and ``Histogram`` would show:
a counter ``x`` is exposed as ``x_total`` and ``x_created``, a histogram as cumulative buckets
with ``+Inf``, ``_count``, ``_sum`` and ``_created``.

Meters are updated from the event loop's thread, the only one that counts.
"""

from __future__ import annotations

import bisect
import math
import re
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, TypeVar

if TYPE_CHECKING:
    from prometheus_client.metrics_core import Metric

Labels = tuple[str, ...]
GaugeReading = float | Iterable[tuple[Labels, float]]

_NAME = re.compile(r"[a-zA-Z_:][a-zA-Z0-9_:]*")


class Counter:
    """A count that only goes up, one per combination of label values."""

    __slots__ = ("_created", "_values", "documentation", "labelnames", "name")

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> None:
        self.name, self.documentation, self.labelnames = name, documentation, tuple(labelnames)
        self._values: dict[Labels, float] = {}
        self._created: dict[Labels, float] = {}
        if not self.labelnames:
            self._start(())

    def _start(self, key: Labels) -> None:
        self._values[key] = 0.0
        self._created[key] = time.time()

    def inc(self, amount: float = 1.0) -> None:
        if self.labelnames:
            raise ValueError(f"{self.name} counts by {', '.join(self.labelnames)}: "
                             "count with .labels(...).inc()")
        self._add((), amount)

    def labels(self, *values: str) -> CounterChild:
        """The count of one combination of label values (``counter.labels("chat").inc()``)."""
        if len(values) != len(self.labelnames):
            raise ValueError(f"{self.name} has the labels {list(self.labelnames)}, "
                             f"got {len(values)} values")
        key = tuple(str(value) for value in values)
        if key not in self._values:
            self._start(key)
        return CounterChild(self, key)

    def _add(self, key: Labels, amount: float) -> None:
        if amount < 0:
            raise ValueError(f"{self.name} is a counter: it goes up, not by {amount}")
        self._values[key] += amount

    def family(self) -> Metric:
        from prometheus_client.core import CounterMetricFamily

        family = CounterMetricFamily(self.name, self.documentation, labels=self.labelnames)
        for key, value in self._values.items():
            family.add_metric(key, value, created=self._created[key])
        return family


class CounterChild:
    __slots__ = ("_counter", "_key")

    def __init__(self, counter: Counter, key: Labels) -> None:
        self._counter, self._key = counter, key

    def inc(self, amount: float = 1.0) -> None:
        self._counter._add(self._key, amount)


class Gauge:
    """A value that goes up and down: set, or read at each scrape from ``read`` (a number; with
    labels, ``(label values, number)`` pairs)."""

    __slots__ = ("_read", "_value", "documentation", "labelnames", "name")

    def __init__(self, name: str, documentation: str, labelnames: Sequence[str] = (), *,
                 read: Callable[[], GaugeReading] | None = None) -> None:
        if labelnames and read is None:
            raise ValueError(f"the gauge {name} has labels: give it read=, which yields them")
        self.name, self.documentation, self.labelnames = name, documentation, tuple(labelnames)
        self._read = read
        self._value = 0.0

    def set(self, value: float) -> None:
        self._value = float(value)

    def set_function(self, read: Callable[[], float]) -> None:
        """Read the value from ``read`` at each scrape instead."""
        self._read = read

    def family(self) -> Metric:
        from prometheus_client.core import GaugeMetricFamily

        family = GaugeMetricFamily(self.name, self.documentation, labels=self.labelnames)
        reading = self._value if self._read is None else self._read()
        if self.labelnames:
            for key, value in reading:  # type: ignore[union-attr]
                family.add_metric(key, value)
        else:
            family.add_metric((), float(reading))  # type: ignore[arg-type]
        return family


class Histogram:
    """Observations counted into buckets (upper bounds, ``+Inf`` added), with their sum."""

    __slots__ = ("_bounds", "_counts", "_created", "_sum", "documentation", "name")

    def __init__(self, name: str, documentation: str, buckets: Sequence[float]) -> None:
        bounds = sorted(float(bound) for bound in buckets)
        if not bounds or bounds[-1] != math.inf:
            bounds.append(math.inf)
        self.name, self.documentation = name, documentation
        self._bounds = tuple(bounds)
        self._counts = [0] * len(bounds)
        self._sum = 0.0
        self._created = time.time()

    def observe(self, value: float) -> None:
        self._counts[bisect.bisect_left(self._bounds, value)] += 1
        self._sum += value

    def family(self) -> Metric:
        from prometheus_client.core import HistogramMetricFamily
        from prometheus_client.utils import floatToGoString

        cumulative, total = [], 0
        for bound, count in zip(self._bounds, self._counts, strict=True):
            total += count
            cumulative.append((floatToGoString(bound), total))
        family = HistogramMetricFamily(self.name, self.documentation, buckets=cumulative,
                                       sum_value=self._sum)
        family.add_sample(f"{self.name}_created", {}, self._created)
        return family


Meter = Counter | Gauge | Histogram
M = TypeVar("M", Counter, Gauge, Histogram)


class Meters:
    """The meters of one process (a node, a hub), each name once, in the order made."""

    def __init__(self) -> None:
        self._meters: dict[str, Meter] = {}

    def counter(self, name: str, documentation: str, labelnames: Sequence[str] = ()) -> Counter:
        return self._add(Counter(name, documentation, labelnames))

    def gauge(self, name: str, documentation: str, labelnames: Sequence[str] = (), *,
              read: Callable[[], GaugeReading] | None = None) -> Gauge:
        return self._add(Gauge(name, documentation, labelnames, read=read))

    def histogram(self, name: str, documentation: str, buckets: Sequence[float]) -> Histogram:
        return self._add(Histogram(name, documentation, buckets))

    def _add(self, meter: M) -> M:
        if not _NAME.fullmatch(meter.name):
            raise ValueError(f"{meter.name!r} is no Prometheus metric name "
                             f"({_NAME.pattern})")
        if meter.name in self._meters:
            raise ValueError(f"a meter is already named {meter.name}")
        self._meters[meter.name] = meter
        return meter

    def families(self) -> Iterator[Metric]:
        for meter in self._meters.values():
            yield meter.family()

    def exposition(self) -> bytes:
        """Every meter in Prometheus's text format (prometheus-client loads here)."""
        from prometheus_client import CollectorRegistry, generate_latest

        registry = CollectorRegistry(auto_describe=False)
        registry.register(_Collector(self))
        return generate_latest(registry)

    @staticmethod
    def content_type() -> str:
        """The ``Content-Type`` of :meth:`exposition`'s text."""
        from prometheus_client.exposition import CONTENT_TYPE_LATEST

        return CONTENT_TYPE_LATEST


class _Collector:
    def __init__(self, meters: Meters) -> None:
        self._meters = meters

    def collect(self) -> Iterable[Metric]:
        return self._meters.families()
