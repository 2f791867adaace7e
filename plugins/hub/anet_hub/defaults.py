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
