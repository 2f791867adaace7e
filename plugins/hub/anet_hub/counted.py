"""Every storage failure of a running hub counted, by the operation that failed
(``anet_hub_storage_errors_total{operation}``): a node's request, and the hub's own work as
well (instance heartbeats, queue reads, sweeps, the rail's ledger), which no node hears of.

:class:`CountedStorage` stands in front of any :class:`~anet_hub.storage.HubStorage`: each of
its coroutine methods, and its ledger's, counts a :class:`~anet_hub.storage.StorageError` under
its name (``ledger.<name>`` for the ledger's) and raises it on unchanged. The callers keep
deciding what a failure means; nothing counts twice.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from anet_hub.storage import StorageError

Count = Callable[[str], None]
"""Told the operation that failed."""


class CountedStorage:
    """``storage`` with each failure told to ``count``; everything else passes through (so
    what the storage also is, ``Presence`` or ``SharedBuckets``, it still is)."""

    def __init__(self, storage: Any, count: Count, *, prefix: str = "") -> None:
        self._storage = storage
        self._count = count
        self._prefix = prefix
        if prefix == "" and hasattr(storage, "ledger"):
            self.ledger = CountedStorage(storage.ledger, count, prefix="ledger.")

    def __getattr__(self, name: str) -> Any:
        found = getattr(self._storage, name)
        if not inspect.iscoroutinefunction(found):
            return found
        operation = self._prefix + name

        @functools.wraps(found)
        async def counted(*args: Any, **kwargs: Any) -> Any:
            try:
                return await found(*args, **kwargs)
            except StorageError:
                self._count(operation)
                raise

        setattr(self, name, counted)  # looked up once per method
        return counted
