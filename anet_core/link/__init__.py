"""The node's side of its home hub, ``node.hub``: the contract every part of the node uses.

The contract (:class:`HubLink` and what it returns and raises) is all the task layer and the
modules see. ``anet_core.link.client`` implements it over the hub's WebSocket protocol
(docs/protocol.md), in four parts: ``connection`` (the socket, the handshake, requests),
``delivery`` (envelopes in, acknowledged once kept), ``directory`` (verified lookups) and
``card`` (what this node publishes about itself).
"""

from __future__ import annotations

from anet_core.link.contract import (
    QUERY_REFUSALS,
    UNKNOWN_AGENT_REASONS,
    AckTiming,
    EnvelopeReceiver,
    Flush,
    HubError,
    HubLink,
    JoinState,
    JoinStatus,
    KeyState,
    PeerInfo,
    SearchPage,
    SearchQuery,
    Verification,
    directory_listing,
    search_remote,
)

__all__ = [
    "QUERY_REFUSALS",
    "UNKNOWN_AGENT_REASONS",
    "AckTiming",
    "EnvelopeReceiver",
    "Flush",
    "HubError",
    "HubLink",
    "JoinState",
    "JoinStatus",
    "KeyState",
    "PeerInfo",
    "SearchPage",
    "SearchQuery",
    "Verification",
    "directory_listing",
    "search_remote",
]
