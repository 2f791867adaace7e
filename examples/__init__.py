"""Example A2A agents and clients for anet (see examples/README.md)."""
