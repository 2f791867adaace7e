"""Which aliases are published now, and with which skills.

An alias is published when ``publish.enabled`` is set, the alias is enabled and marked
``published``, and what serves it exists: the configured backend it names (a task for an
``inbox`` alias needs none). It exposes the skills named for it that its backend really offers
(the backend's card lists them, ``anet_card_skills`` with ``backend`` set); a name that resolves
to nothing is dropped and reported, at start and by ``anet doctor``.
"""

from __future__ import annotations

import asyncio
import logging
import time
from dataclasses import dataclass, field
from typing import Any

from anet_a2a.config import AliasConfig, AliasServe, PublishConfig
from anet_core.api import Node, SkillSource

log = logging.getLogger(__name__)

SKILLS_TTL_S = 30.0
"""How long what the backends offer is reused before they are asked again."""
SKILLS_READ_TIMEOUT_S = 10.0


@dataclass(frozen=True)
class PublishedAlias:
    name: str
    config: AliasConfig
    skills: list[dict[str, Any]]

    @property
    def skill(self) -> str | None:
        """The skill a task of this alias carries: the backend's match, none for ``*``."""
        return None if self.config.backend == "*" else self.config.backend

    @property
    def offer(self) -> bool:
        return self.config.serve is AliasServe.BACKEND


@dataclass
class AliasState:
    published: dict[str, PublishedAlias] = field(default_factory=dict)
    problems: list[str] = field(default_factory=list)
    read_at: float = 0.0


class Aliases:
    """The aliases of ``modules.a2a.publish`` as they resolve now."""

    def __init__(self, node: Node, config: PublishConfig) -> None:
        self._node = node
        self._config = config
        self._state: AliasState | None = None
        self._lock = asyncio.Lock()

    async def state(self) -> AliasState:
        async with self._lock:
            if self._state is None or time.monotonic() - self._state.read_at > SKILLS_TTL_S:
                self._state = await self._resolve()
        return self._state

    async def alias(self, name: str) -> PublishedAlias | None:
        return (await self.state()).published.get(name)

    async def _resolve(self) -> AliasState:
        state = AliasState(read_at=time.monotonic())
        if not self._config.enabled:
            return state
        sources: dict[str, SkillSource] = {
            source.backend: source
            for source in self._node.plugins.collect("anet_card_skills", node=self._node)
            if source.backend is not None}
        for name, alias in sorted(self._config.aliases.items()):
            if not (alias.enabled and alias.published):
                continue
            key = f"modules.a2a.publish.aliases.{name}"
            source = sources.get(alias.backend)
            if source is None and alias.serve is AliasServe.BACKEND:
                known = ", ".join(sorted(sources)) or "none"
                state.problems.append(f"{key}.backend {alias.backend!r} names no configured "
                                      f"backend (configured: {known}); the alias is not "
                                      "published")
                continue
            offered = await self._offered(key, alias, source, state.problems)
            by_id = {str(skill.get("id")): skill for skill in offered}
            if alias.skills and not offered:
                state.problems.append(f"{key}.skills names {len(alias.skills)} skill(s) but its "
                                      f"backend {alias.backend!r} offers none now; the card "
                                      "lists no skills")
            else:
                for dropped in (skill for skill in alias.skills if skill not in by_id):
                    state.problems.append(f"{key}.skills: {dropped!r} is not a skill of backend "
                                          f"{alias.backend!r} (it offers "
                                          f"{', '.join(sorted(by_id))}); it is left off")
            state.published[name] = PublishedAlias(
                name=name, config=alias,
                skills=[by_id[skill] for skill in alias.skills if skill in by_id])
        return state

    @staticmethod
    async def _offered(key: str, alias: AliasConfig, source: SkillSource | None,
                       problems: list[str]) -> list[dict[str, Any]]:
        if source is None:
            return []
        try:
            offered = await asyncio.wait_for(source.read(), SKILLS_READ_TIMEOUT_S)
        except Exception as error:  # a module's source failed: its skills are unknown for now
            log.debug("event=a2a-publish-skills-unread backend=%s", alias.backend, exc_info=True)
            problems.append(f"{key}: the skills of backend {alias.backend!r} cannot be read now "
                            f"({type(error).__name__}: {error})")
            return []
        return [skill for skill in offered if isinstance(skill, dict) and skill.get("id")]
