"""The node's pin of its home hub, ``<data>/hub-pin.json`` (docs/protocol.md, "Hub registration"
and "Hub instances"): the hub's key history as met at the first registration, the URLs the node
was joined with then, and the instances the hub advertised, signed.

A pin holds for the hub the node is joined to; one taken while joined elsewhere (config.json
edited by hand: ``anet join`` removes the pin) is not this hub's, and the hub met next is pinned
afresh.
"""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anet_core.identity import HistoryError, VerifiedHistory, verify_history
from anet_core.protocol.documents import DirectoryDocError, HubInstances, verify_hub_instances
from anet_core.protocol.frames import Refusal, hub_urls
from anet_core.util.fsutil import write_atomic

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Advertised:
    """The hub's signed ``anet.hub-instances`` document, and the URLs in it a node can dial."""

    doc: dict[str, Any]
    urls: tuple[str, ...]

    @classmethod
    def checked(cls, url: str, doc: dict[str, Any] | None,
                history: VerifiedHistory) -> Advertised | None:
        """What the hub at ``url`` advertised, when ``history`` signed it (else logged)."""
        if doc is None:
            return None
        try:
            return cls(doc, _dialable(verify_hub_instances(doc, history)))
        except DirectoryDocError as error:
            log.warning("event=hub-instances-ignored url=%s reason=%s detail=%r", url,
                        error.reason, error.message)
            return None


def _dialable(advertised: HubInstances) -> tuple[str, ...]:
    """The advertised URLs a node can dial (any other is logged and left out)."""
    urls, ignored = hub_urls(advertised.urls)
    if ignored:
        log.warning("event=hub-instances-ignored urls=%r reason=not-hub-urls", ignored)
    return urls


class HubPin:
    """``hub-pin.json``, read and written for a node joined with the URLs ``joined``."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def history(self, joined: Sequence[str]) -> VerifiedHistory | None:
        """The pinned history of the hub joined with ``joined``; None when there is none (the
        hub is met for the first time). Raises :class:`Refusal` for a pin that cannot be
        read."""
        pin = self._read()
        if pin is None or not _pinned_while(pin, joined):
            return None
        try:
            return verify_history(pin["history"], expected_aid=pin["hubAid"])
        except (HistoryError, KeyError, TypeError) as error:
            raise self._unreadable(str(error)) from None

    def instances(self, joined: Sequence[str]) -> tuple[str, ...]:
        """The instances the pinned hub advertised, when it is the hub joined with
        ``joined`` (nothing when the pin is unreadable: the connection says why)."""
        try:
            pin = self._read()
            if pin is None or "instances" not in pin or not _pinned_while(pin, joined):
                return ()
            history = verify_history(pin["history"], expected_aid=pin["hubAid"])
            return _dialable(verify_hub_instances(pin["instances"], history))
        except (Refusal, HistoryError, DirectoryDocError, KeyError, TypeError):
            return ()

    def write(self, url: str, history: VerifiedHistory, joined: Sequence[str],
              advertised: dict[str, Any] | None) -> None:
        """Pin the hub registered at ``url`` with the instances it ``advertised`` (signed), or,
        when it advertised none this time, those it advertised before."""
        pin: dict[str, Any] = {"url": url, "hubAid": history.aid, "history": history.to_list(),
                               "joined": list(joined)}
        before = None
        with contextlib.suppress(Refusal):
            before = self._read()
        if advertised is None and before is not None and before.get("hubAid") == history.aid:
            advertised = before.get("instances")
        if advertised is not None:
            pin["instances"] = advertised
        if pin != before:
            write_atomic(self.path, (json.dumps(pin, indent=2) + "\n").encode())

    def _read(self) -> dict[str, Any] | None:
        try:
            pin = json.loads(self.path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None
        except (OSError, ValueError) as error:
            raise self._unreadable(str(error)) from None
        if not isinstance(pin, dict):
            raise self._unreadable("not a JSON object")
        return pin

    def _unreadable(self, why: str) -> Refusal:
        return Refusal("hub-pin-unreadable", f"{self.path}: {why}; delete it and run "
                                             "`anet join` again")


def _pinned_while(pin: dict[str, Any], joined: Sequence[str]) -> bool:
    """The pin was taken at one of the URLs ``joined``, or while joined with one."""
    earlier = pin.get("joined")
    urls = [pin.get("url"), *(earlier if isinstance(earlier, list) else ())]
    return any(isinstance(url, str) and url in joined for url in urls)
