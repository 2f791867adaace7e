"""The running direct peers of a node: their agents (read again every REFRESH_S) and tasks."""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field
from typing import Any

from anet_a2a.config import A2AConfig, PeerConfig
from anet_a2a.peers.client import ClientPolicy, PeerClient
from anet_a2a.peers.discovery import DIRECT_SEPARATOR, DirectAgent, PeerReader
from anet_a2a.peers.guard import PeerError, Resolver, system_resolver
from anet_a2a.peers.store import PeerTaskStore
from anet_a2a.peers.tasks import DirectTasks, PeerTasks
from anet_a2a.state import MODULE, StateDir
from anet_core.api import Node, NodeKey

log = logging.getLogger(__name__)

REFRESH_S = 300.0
"""How often every peer's catalog or card is read again."""
REREAD_AFTER_S = 10.0
"""An agent id nobody knows makes its peer be read again, at most this often."""
FIRST_READ_WAIT_S = 10.0
"""How long a request waits for the first reading of the peers after a start."""


@dataclass
class PeerState:
    """What the last reading of one peer found."""

    agents: list[DirectAgent] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    error: str = ""
    read_at: float = 0.0


class DirectPeers:
    def __init__(self, config: A2AConfig, client: PeerClient, store: PeerTaskStore, *,
                 give_up_after_s: float) -> None:
        self.peers: dict[str, PeerConfig] = {peer.name: peer for peer in config.peers}
        self.reader = PeerReader(client)
        self.states: dict[str, PeerState] = {name: PeerState() for name in self.peers}
        self.tasks = DirectTasks(store, client, self.peers, give_up_after_s=give_up_after_s)
        self.first_read = asyncio.Event()

    @property
    def agents(self) -> dict[str, DirectAgent]:
        return {agent.id: agent for state in self.states.values() for agent in state.agents}

    async def read(self, name: str) -> PeerState:
        """Read one peer now; what it showed replaces what it showed before."""
        peer = self.peers[name]
        state = PeerState(read_at=time.monotonic())
        try:
            found = await self.reader.discover(peer)
            state.agents, state.problems = found.agents, found.problems
        except PeerError as error:
            state.error = error.message
            log.warning("event=a2a-peer-unread peer=%s reason=%s detail=%r", name, error.reason,
                        error.message)
        except Exception as error:  # a peer's odd answer must not stop the reading of others
            log.exception("event=a2a-peer-unread peer=%s reason=crash", name)
            state.error = f"{type(error).__name__}: {error}"
        for problem in state.problems:
            log.warning("event=a2a-peer-agent-left-out peer=%s detail=%r", name, problem)
        self.states[name] = state
        return state

    async def read_all(self) -> None:
        await asyncio.gather(*(self.read(name) for name in self.peers))

    async def agent(self, agent_id: str) -> DirectAgent | None:
        """The agent with this id; an unknown one makes its peer be read again (not more often
        than REREAD_AFTER_S), so an agent the peer published since shows up."""
        with suppress(TimeoutError):
            await asyncio.wait_for(self.first_read.wait(), FIRST_READ_WAIT_S)
        known = self.agents.get(agent_id)
        if known is not None:
            return known
        name = agent_id.rpartition(DIRECT_SEPARATOR)[2]
        state = self.states.get(name)
        if state is None or time.monotonic() - state.read_at < REREAD_AFTER_S:
            return None
        await self.read(name)
        return self.agents.get(agent_id)

    def port(self, agent: DirectAgent) -> PeerTasks:
        return PeerTasks(agent, self.tasks)

    async def keep_reading(self) -> None:
        await self.read_all()
        self.first_read.set()
        self.tasks.recover(self.agents)
        while True:
            await asyncio.sleep(REFRESH_S)
            await self.read_all()


DIRECT_PEERS = NodeKey("a2a-direct-peers", DirectPeers)


def evidence_recorder(node: Node) -> Any:
    async def record(kind: str, data: dict[str, Any]) -> None:
        await node.evidence.record(kind, data)

    return record


@asynccontextmanager
async def direct_peers(node: Node, *, resolver: Resolver = system_resolver
                       ) -> AsyncIterator[DirectPeers | None]:
    """The direct peers of ``node`` while it runs (None when none is configured)."""
    config = node.config.module(MODULE, A2AConfig)
    if not config.peers:
        yield None
        return
    client = PeerClient(ClientPolicy.of(config), resolver=resolver,
                        record=evidence_recorder(node))
    store = PeerTaskStore(StateDir.of(node.paths).root / "peer_tasks.db")
    service = DirectPeers(config, client, store,
                          give_up_after_s=node.config.node.no_response_after.total_seconds())
    node[DIRECT_PEERS] = service
    reading = asyncio.ensure_future(service.keep_reading())
    try:
        yield service
    finally:
        reading.cancel()
        with suppress(asyncio.CancelledError):
            await reading
        await service.tasks.close()
        del node[DIRECT_PEERS]
        store.close()
