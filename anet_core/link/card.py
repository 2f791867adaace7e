"""This node's network card at its hub: what it publishes about itself, and keeping it current.

The card (docs/protocol.md, "Directory") is signed afresh and published at every registration.
Its skills are the configured ones (config.json's ``node`` section) and those the modules offer
(``anet_card_skills``); those can change while the node runs, so they are compared every
``CARD_REFRESH_S`` and the card is published again when they did. Its ``charge`` says whether
they cost something (:func:`charge_of`, from the skills the modules price: ``SkillSource.prices``).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any

from anet_core.identity import Identity, sign_document
from anet_core.link.contract import HubError
from anet_core.protocol.documents import CARD_TYPE
from anet_core.protocol.frames import HubFrame
from anet_core.protocol.tasks import ANY_SKILL

if TYPE_CHECKING:
    from anet_core.config import NodeSection
    from anet_core.records import SkillSource

log = logging.getLogger(__name__)

CARD_REFRESH_S = 300.0
"""How often the card is compared with what the modules offer, and republished if it changed."""
SKILL_SOURCE_TIMEOUT_S = 10.0

Skills = list[dict[str, Any]]


class Charge(StrEnum):
    """The card's ``charge``: do this agent's skills cost something?"""

    FREE = "free"
    PARTIAL = "partial"
    PAID = "paid"


def charge_of(skills: Skills, priced: frozenset[str]) -> Charge:
    """``free`` when none of ``skills`` is priced, ``paid`` when all are (always, with a price
    for :data:`ANY_SKILL`), else ``partial``."""
    if ANY_SKILL in priced:
        return Charge.PAID
    ids = {skill.get("id") for skill in skills}
    charged = ids & priced
    if not charged:
        return Charge.FREE
    return Charge.PAID if charged == ids else Charge.PARTIAL


@dataclass
class CardContent:
    """What this node says about itself; the modules' skills are added at each publication."""

    name: str
    description: str
    skills: Skills = field(default_factory=list)
    charge: Charge = Charge.FREE
    """Set at each publication from the skills the modules price (:func:`charge_of`)."""


def card_from_config(section: NodeSection) -> CardContent:
    """The card this node publishes, from config.json's ``node`` section."""
    return CardContent(name=section.name, description=section.description,
                       skills=[skill.model_dump() for skill in section.skills])


class CardPublisher:
    """Signs ``content`` with this node's current key and publishes it through ``request``."""

    def __init__(self, identity: Identity, content: CardContent, *,
                 request: Callable[[dict[str, Any]], Awaitable[HubFrame]],
                 module_skills: Callable[[], Awaitable[Skills]] | None = None,
                 priced: Callable[[], frozenset[str]] | None = None) -> None:
        self._identity = identity
        self._content = content
        self._request = request
        self._module_skills = module_skills
        self._priced = priced
        self._published: tuple[Skills, Charge] | None = None

    async def publish(self, home_hub: str) -> None:
        """Publish now; a refusal is logged (the card is published again at the next
        registration or refresh)."""
        try:
            await self._publish(home_hub)
        except HubError as error:
            log.warning("event=card-refused reason=%s message=%r", error.reason, error.message)

    async def refresh(self, home_hub: str) -> None:
        """Publish again if the skills the modules offer changed since the last publication."""
        skills = await self._skills()
        if (skills, self._charge(skills)) != self._published:
            await self.publish(home_hub)

    async def _skills(self) -> Skills:
        """The configured skills, then those the modules offer now (a configured id wins)."""
        skills = list(self._content.skills)
        offered = await self._module_skills() if self._module_skills is not None else []
        known = {skill.get("id") for skill in skills}
        return skills + [skill for skill in offered if skill.get("id") not in known]

    def _charge(self, skills: Skills) -> Charge:
        return charge_of(skills, self._priced() if self._priced is not None else frozenset())

    async def _publish(self, home_hub: str) -> None:
        content = self._content
        skills = await self._skills()
        content.charge = self._charge(skills)
        signed = sign_document(self._identity, {
            "type": CARD_TYPE, "name": content.name, "description": content.description,
            "skills": skills, "charge": content.charge.value, "homeHub": home_hub,
            "publishedAt": int(time.time())})
        await self._request({"type": "publish", "card": signed})
        self._published = (skills, content.charge)
        log.info("event=card-published url=%s keySeq=%d", home_hub, signed["keySeq"])


async def module_skills(skill_sources: Callable[[], list[SkillSource]]) -> Skills:
    """The skills every module offers for the card (``skill_sources``: ``anet_card_skills``);
    a source that fails or takes longer than ``SKILL_SOURCE_TIMEOUT_S`` is left out of this
    publication."""
    sources = skill_sources()

    async def read(source: SkillSource) -> Skills:
        try:
            return await asyncio.wait_for(source.read(), SKILL_SOURCE_TIMEOUT_S)
        except Exception as error:  # noqa: BLE001 - one module's failure leaves its skills out
            log.warning("event=card-skills-failed module=%s error=%r", source.module, error)
            return []

    return [skill for skills in await asyncio.gather(*map(read, sources)) for skill in skills]


def card_prices(skill_sources: Callable[[], list[SkillSource]]) -> dict[str, dict[str, Any]]:
    """The prices the modules give for the card's skills (``SkillSource.prices``); the first
    module to price a skill wins."""
    prices: dict[str, dict[str, Any]] = {}
    for source in skill_sources():
        for skill, price in source.prices.items():
            prices.setdefault(skill, price)
    return prices


def who_serves_and_charges(sources: list[SkillSource]) -> dict[str, Any]:
    """What the card's sources say about who serves which tasks and who charges for them (the
    ``card`` of ``anet status --json``, read by the doctor's ``card-charge``): ``catchAll``,
    the modules whose backend serves every task no skill of its own names (``match`` ``"*"``:
    a task that names no skill too); ``prices``, each priced skill id (:data:`ANY_SKILL` for
    every task no other price names) and the module that charges for it."""
    prices: dict[str, str] = {}
    for source in sources:
        for skill in source.prices:
            prices.setdefault(skill, source.module)
    return {"catchAll": sorted({source.module for source in sources
                                if source.backend == ANY_SKILL}),
            "prices": dict(sorted(prices.items()))}


def priced_skills(skill_sources: Callable[[], list[SkillSource]]) -> frozenset[str]:
    """The ids of the card's skills that some module prices."""
    return frozenset(card_prices(skill_sources))


async def refresh_card_forever(refresh: Callable[[], Awaitable[None]]) -> None:
    """Modules' skills can change while the node runs (a backend restarted with a new card);
    a refused publication is logged and tried again at the next round."""
    while True:
        await asyncio.sleep(CARD_REFRESH_S)
        await refresh()
