"""What the node shows of agents: the skills on its network card, the extensions a proxy card
declares, and the agents a module adds to the directory listing.

Returned by ``anet_card_skills`` (:class:`SkillSource`), ``anet_card_extensions``
(:class:`CardExtension`) and ``anet_directory_sources`` (:class:`DirectorySource`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from anet_core.link import SearchQuery
    from anet_core.wire import AgentExtension


@dataclass(frozen=True)
class SkillSource:
    """Skills a module offers on the node's network card (``anet_card_skills``).

    ``read`` returns skills as the card lists them (``{"id", "name", "description", "tags"}``);
    the hub link awaits it before every publication, with a timeout, and leaves out a source
    that fails.
    """

    module: str
    read: Callable[[], Awaitable[list[dict[str, Any]]]]
    backend: str | None = None
    """The ``match`` of the configured backend these skills come from, when they come from one
    (the a2a module publishes an alias with the skills its backend really offers)."""
    prices: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The card's skills (from any source) this module charges for: skill id → its price as
    JSON (module x402: ``{"amount", "asset", "networks"}``). The card's ``charge`` is ``free``
    when none of its skills is priced, ``paid`` when all are, else ``partial``; the prices are
    what the extended card tells a requester."""


@dataclass(frozen=True)
class DirectorySource:
    """Agents a module adds to the node's directory listing (``anet_directory_sources``).

    ``list`` takes the listing's filters (``skill``, ``tag``, ``q`` of a ``SearchQuery``; the
    cursor and limit are the hub's) and returns the agents that match them, shaped like the
    entries of ``directory_listing`` (``aid``, ``name``, ``description``, ``skills``) plus what
    marks where they come from (``directPeer``, ``url``); the core adds ``"source": module``,
    awaits it with a timeout and leaves out a source that fails.
    """

    module: str
    list: Callable[[SearchQuery], Awaitable[list[dict[str, Any]]]]


@dataclass(frozen=True)
class CardExtension:
    """An A2A extension a proxy card declares (an ``AgentExtension`` on the wire).

    ``params`` is plain JSON; ``required`` makes clients that do not request the extension
    fail with ExtensionSupportRequiredError, so leave it False unless that is the point.
    """

    module: str
    uri: str
    description: str = ""
    required: bool = False
    params: dict[str, Any] | None = None
    also_activated_by: tuple[str, ...] = ()
    """Other URIs of the same extension (an older or newer spelling) that a client may request
    in ``A2A-Extensions`` to activate it; the card declares ``uri`` only."""

    def as_agent_extension(self) -> AgentExtension:
        """The extension as the card declares it (``capabilities.extensions``)."""
        from anet_core.wire import AgentExtension

        return AgentExtension(uri=self.uri, description=self.description,
                              required=self.required, params=self.params)

