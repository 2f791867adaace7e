"""On call: send one incident to every triage agent, on the network and at direct peers, and
collect the answers.

    python -m examples.oncall "Checkout p99 latency above 2 s since 14:05 UTC"
    python -m examples.oncall --tag triage --json "Checkout p99 latency above 2 s"

The node's local endpoint is the one place to ask: ``GET /a2a/v1/agents?tag=triage`` lists the
network's agents with a skill tagged ``triage`` and the agents of direct peers whose peer or
skills carry the tag (``modules.a2a.peers``, docs/a2a.md), each with its own URL. Every agent
gets the same incident with the official a2a-sdk client, all at once; each answer is printed as
it is. The message id is derived from the incident, so running the script again for the same
incident returns the same tasks instead of paging everyone twice. The address and token come
from the node's data directory ($ANET_DATA_DIR, default ~/.anet), as for examples/client.py.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from a2a.client import ClientConfig, ClientFactory
from a2a.types import Message, Part, Role, SendMessageRequest, StreamResponse, Task, TaskState
from a2a.utils.errors import A2AError

from examples.client import ClientSetupError, LocalEndpoint

PAGE_LIMIT = 100


@dataclass(frozen=True)
class Answer:
    agent: str
    direct_peer: str | None
    state: str
    reply: str

    def as_dict(self) -> dict[str, Any]:
        return {"agent": self.agent, "directPeer": self.direct_peer, "state": self.state,
                "reply": self.reply}


async def triage_agents(http: httpx.AsyncClient, endpoint: LocalEndpoint,
                        tag: str) -> list[dict[str, Any]]:
    """Every agent the endpoint lists for ``tag``, all pages."""
    agents: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = {"tag": tag, "limit": str(PAGE_LIMIT), **({"cursor": cursor} if cursor else {})}
        response = await http.get(f"{endpoint.base_url}/a2a/v1/agents", params=params)
        response.raise_for_status()
        page = response.json()
        if page.get("hubError"):
            print(f"note: the network's directory cannot be searched now ({page['hubError']}); "
                  "only direct peers are asked", file=sys.stderr)
        agents += page["agents"]
        cursor = page.get("nextCursor")
        if not cursor:
            return agents


def _text(parts: Any) -> str:
    return "\n".join(part.text for part in parts if part.text)


def reply_of(event: StreamResponse) -> tuple[str, str]:
    """(state, reply text) of a send's answer: the task's artifacts, else its status message,
    or the agent's Message."""
    if event.HasField("message"):
        return "MESSAGE", _text(event.message.parts)
    task: Task = event.task
    text = "\n".join(_text(artifact.parts) for artifact in task.artifacts) \
        or _text(task.status.message.parts)
    return TaskState.Name(task.status.state), text


async def ask(http: httpx.AsyncClient, agent: dict[str, Any], incident: str) -> Answer:
    digest = hashlib.sha256(incident.encode()).hexdigest()[:24]
    peer = (agent.get("anet.directPeer") or {}).get("peer")
    try:
        client = await ClientFactory(ClientConfig(httpx_client=http, streaming=False)
                                     ).create_from_url(agent["url"])
        message = Message(role=Role.ROLE_USER, message_id=f"incident-{digest}",
                          context_id=f"incident-{digest}", parts=[Part(text=incident)])
        events = [event async for event in client.send_message(SendMessageRequest(
            message=message))]
        await client.close()
        state, reply = reply_of(events[-1])
    except (A2AError, httpx.HTTPError) as error:
        state, reply = "ERROR", f"{type(error).__name__}: {error}"
    return Answer(agent=agent["aid"], direct_peer=peer, state=state, reply=reply)


async def run(incident: str, tag: str, endpoint: LocalEndpoint) -> list[Answer]:
    async with endpoint.http_client() as http:
        agents = await triage_agents(http, endpoint, tag)
        return list(await asyncio.gather(*(ask(http, agent, incident) for agent in agents)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("incident", help="the incident, as text")
    parser.add_argument("--tag", default="triage", help="the tag of the agents to ask")
    parser.add_argument("--json", action="store_true", help="print the answers as JSON")
    args = parser.parse_args(argv)
    data_dir = Path(os.environ.get("ANET_DATA_DIR", Path.home() / ".anet"))
    try:
        answers = asyncio.run(run(args.incident, args.tag, LocalEndpoint.from_data_dir(data_dir)))
    except (ClientSetupError, httpx.HTTPError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([answer.as_dict() for answer in answers], indent=2))
    elif not answers:
        print(f"No agent is tagged {args.tag!r}.")
    for answer in [] if args.json else answers:
        where = f"direct peer {answer.direct_peer}" if answer.direct_peer else "network"
        print(f"== {answer.agent} ({where}): {answer.state}")
        print(answer.reply)
    return 0 if answers and all(answer.state != "ERROR" for answer in answers) else 1


if __name__ == "__main__":
    sys.exit(main())
