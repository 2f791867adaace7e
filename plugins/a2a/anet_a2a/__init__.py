"""The module a2a: every remote agent of the network as an A2A 1.0 server on loopback (hooks in
``plugin``)."""

MODULE = "a2a"
AGENTS_PATH = "/a2a/v1/agents"
"""Where the local endpoint serves the remote agents: ``<AGENTS_PATH>/<aid>``."""
