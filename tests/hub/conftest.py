"""The hub server's tests: a real hub in this event loop and real clients (skipped without the
hub module)."""

from tests.support.hubs import hub, hub_factory, inbox_factory, nodes, raw  # noqa: F401 - fixtures
