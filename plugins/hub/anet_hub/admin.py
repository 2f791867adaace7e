"""What the hub operator does from a shell, on the hub's data directory, while the hub runs or not.

Each function opens the hub's storage for one change (``hub.db``, or the PostgreSQL named in
``cluster.json``: anet_hub.deployment). A running hub sees the change at once:
pending sessions poll for their approval, and the official list is read from storage on every
directory answer.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from anet_core.api import AnetError, Identity, check_aid
from anet_core.protocol.documents import sign_official_list
from anet_hub.deployment import open_existing
from anet_hub.storage import AgentRecord, HubStorage, StorageError

T = TypeVar("T")


@dataclass(frozen=True)
class PendingAgent:
    aid: str
    first_seen: float
    name: str | None


NODE_AID_HINT = "copy it from `anet hub pending` or from the node's `anet status`"


async def _with_storage(data_dir: Path, action: Callable[[HubStorage], Awaitable[T]]) -> T:
    storage = await open_existing(data_dir)
    try:
        return await action(storage)
    except StorageError as error:
        raise AnetError(error.reason, error.message,
                        hint=f"check the disk or the database that holds {data_dir}'s hub") \
            from None
    finally:
        await storage.close()


def approve(data_dir: Path, aid: str) -> None:
    """Let a pending node in; its waiting session is registered within a second."""
    check_aid(aid, hint=NODE_AID_HINT)

    async def run(storage: HubStorage) -> None:
        if await storage.approve(aid):
            return
        record = await storage.get_agent(aid)
        if record is None:
            raise AnetError("hub-unknown-aid", f"{aid} never tried to register at this hub",
                            hint="`anet hub pending` lists the nodes waiting for approval")
        raise AnetError("hub-already-approved", f"{aid} is already registered")

    asyncio.run(_with_storage(data_dir, run))


def pending(data_dir: Path) -> list[PendingAgent]:
    def describe(record: AgentRecord) -> PendingAgent:
        name = record.card.get("name") if record.card else None
        return PendingAgent(record.aid, record.first_seen, name if isinstance(name, str) else None)

    async def run(storage: HubStorage) -> list[PendingAgent]:
        return [describe(record) for record in await storage.list_pending()]

    return asyncio.run(_with_storage(data_dir, run))


def change_official(data_dir: Path, aid: str, *, add: bool) -> list[str]:
    """Add or remove ``aid``; re-sign the list with the operator key. Returns the new members."""
    check_aid(aid, hint=NODE_AID_HINT)
    operator = Identity.load(data_dir / "identity")

    async def run(storage: HubStorage) -> list[str]:
        current = await storage.get_official_list()
        members = set(current["members"]) if current else set()
        if add:
            members.add(aid)
        elif aid not in members:
            raise AnetError("hub-not-official", f"{aid} is not on the official list")
        else:
            members.discard(aid)
        version = (current["version"] + 1) if current else 1
        await storage.put_official_list(sign_official_list(operator, sorted(members),
                                                           version=version))
        return sorted(members)

    return asyncio.run(_with_storage(data_dir, run))


def official(data_dir: Path) -> list[str]:
    async def run(storage: HubStorage) -> list[str]:
        current = await storage.get_official_list()
        return list(current["members"]) if current else []

    return asyncio.run(_with_storage(data_dir, run))
