"""The URLs of the hub's instances, as the hub advertises them (docs/protocol.md, "Hub instances").

Each instance's ``--public-url`` is what it advertises. In a cluster every instance writes its URL
into shared storage with its heartbeat (:class:`InstanceUrls`), and reads the others' back every
``ADVERTISE_EVERY_S``: an instance is advertised while it was seen within ``ADVERTISED_FOR_S``,
so a node that registers while an instance is down for a while still learns it. The list is
signed with the hub's key (an ``anet.hub-instances`` document) whenever it changes, and sent in
every challenge and in ``GET /v1/hub``.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from anet_core.api import Identity
from anet_core.protocol.documents import MAX_HUB_INSTANCES, sign_hub_instances
from anet_hub.storage import StorageError

log = logging.getLogger(__name__)

ADVERTISE_EVERY_S = 10.0
ADVERTISED_FOR_S = 3600.0
"""An instance not seen for an hour (stopped, or killed) is no longer advertised."""


@runtime_checkable
class InstanceUrls(Protocol):
    """The cluster's record of its instances (``anet_hub.postgres``)."""

    async def instance_urls(self, *, within_s: float) -> list[str]:
        """The ``--public-url`` of every instance seen within ``within_s`` seconds."""


@dataclass
class Advertisement:
    """This hub's signed list of instance URLs, kept current."""

    identity: Identity
    own: str | None
    """This instance's ``--public-url`` (None: it advertises nothing of its own)."""
    doc: dict[str, Any] | None = None
    """The signed ``anet.hub-instances`` document; None while there is no URL to advertise."""
    on_change: Callable[[dict[str, Any]], None] | None = None
    """Told each new document (the hub tells those connected)."""
    _urls: tuple[str, ...] = field(default=(), repr=False)

    def update(self, others: Iterable[str] = ()) -> None:
        """Advertise ``others`` besides this instance's own URL; sign again when they changed."""
        urls = tuple(sorted({url for url in (self.own, *others) if url}))[:MAX_HUB_INSTANCES]
        if urls == self._urls:
            return
        self._urls = urls
        self.doc = sign_hub_instances(self.identity, list(urls)) if urls else None
        log.info("event=instances-advertised urls=%s", ",".join(urls) or "none")
        if self.doc is not None and self.on_change is not None:
            self.on_change(self.doc)

    async def follow(self, cluster: InstanceUrls) -> None:
        """Keep up with the cluster's instances for as long as the hub runs."""
        while True:
            try:
                self.update(await cluster.instance_urls(within_s=ADVERTISED_FOR_S))
            except StorageError as error:  # the list already advertised stays
                log.warning("event=instances-unread reason=%s", error.reason)
            await asyncio.sleep(ADVERTISE_EVERY_S)
