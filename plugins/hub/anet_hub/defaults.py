"""What ``anet hub serve`` uses when its flags say nothing: the limits per node and per federated
hub. Kept apart from the server so that the command's parser (every ``anet hub`` command builds
it) loads none of the server's code."""

from __future__ import annotations

DEFAULT_MAX_ENVELOPE_BYTES = 16 * 1024 * 1024
DEFAULT_RATE_PER_SECOND = 50.0
"""Requests per second per node."""
DEFAULT_BURST = 200
"""Requests a node may make at once above the rate."""

DEFAULT_FEDERATION_RATE_PER_SECOND = 500.0
"""Requests per second from each federated hub: a hub forwards for many nodes."""
DEFAULT_FEDERATION_BURST = 2000

DEFAULT_HEARTBEAT_S = 15.0
"""After this long without a frame from a node or a federated hub, the hub pings it; no pong
within half of it ends the connection, so a peer that froze is offline within 25 s. A node
pings its hub every 10 s while idle (``hub.heartbeat``), which counts as a frame: the hub pings
only the peers that do not."""
