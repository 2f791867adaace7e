"""The node's side of the hub, tested against a real hub in this event loop (skipped without
the hub module)."""

from tests.support.hubs import hub, hub_factory, inbox_factory, nodes, raw  # noqa: F401 - fixtures
