"""The module a2a: every remote agent of the network as an A2A 1.0 server on loopback (hooks in
``plugin``)."""

import re

MODULE = "a2a"
AGENTS_PATH = "/a2a/v1/agents"
"""Where the local endpoint serves the remote agents: ``<AGENTS_PATH>/<aid>``."""
NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_-]{0,63}\Z")
"""Peer, alias and token names: one URL path segment, no dots (an agent id is
``<agent>@<peer>``)."""
