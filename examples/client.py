"""Talk to remote agents through the node's local A2A endpoint with the official a2a-sdk client.

    python examples/client.py                       # list agents, send a message to the first
    python examples/client.py --aid AID --text "summarize 2: ..." --stream --cancel

The address and the token come from the node's data directory ($ANET_DATA_DIR, default ~/.anet):
modules/a2a/a2a_addr.txt and modules/a2a/a2a_token.txt. The token goes into an HTTP header only;
it is never printed and never taken from the command line, where other users could read it.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from a2a.client import A2ACardResolver, A2AClientError, Client, ClientConfig, ClientFactory
from a2a.helpers import get_message_text
from a2a.types import (
    AgentCard,
    CancelTaskRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    TaskState,
)
from a2a.utils.errors import A2AError
from google.protobuf.json_format import MessageToDict

DEFAULT_TEXT = "stats: Hello from the anet example client. It counts on you."
BINDINGS = ["JSONRPC", "HTTP+JSON"]
CONNECT_TIMEOUT_S = 10
STEP_TIMEOUT_S = 300  # a remote agent may take minutes; the node reports "working" meanwhile


class ClientSetupError(Exception):
    """Something to fix before the client can run; the message says what."""


@dataclass(frozen=True)
class LocalEndpoint:
    """Where the node's local A2A endpoint listens, and its bearer token."""

    address: str
    token: str

    @classmethod
    def from_data_dir(cls, data_dir: Path) -> LocalEndpoint:
        state = data_dir / "modules" / "a2a"
        try:
            address = (state / "a2a_addr.txt").read_text().strip()
            token = (state / "a2a_token.txt").read_text().strip()
        except FileNotFoundError as missing:
            raise ClientSetupError(
                f"{missing.filename} does not exist: start the node with `anet up` (data "
                f"directory {data_dir}; set ANET_DATA_DIR to use another)") from None
        return cls(address=address, token=token)

    @property
    def base_url(self) -> str:
        return f"http://{self.address}"

    def card_url(self, aid: str) -> str:
        return f"{self.base_url}/a2a/v1/agents/{aid}"

    def http_client(self) -> httpx.AsyncClient:
        # A default header, so the token goes with every request, the card fetch included.
        return httpx.AsyncClient(headers={"Authorization": f"Bearer {self.token}"},
                                 timeout=httpx.Timeout(CONNECT_TIMEOUT_S, read=STEP_TIMEOUT_S))


def default_data_dir() -> Path:
    return Path(os.environ.get("ANET_DATA_DIR") or Path.home() / ".anet")


def user_message(text: str) -> Message:
    # No messageId reuse: the endpoint treats a repeated (contextId, messageId) as the same message.
    return Message(role=Role.ROLE_USER, message_id=os.urandom(8).hex(), parts=[Part(text=text)])


def whole_numbers_as_ints(value: Any) -> Any:
    """Undo protobuf's doubles for display: 42.0 prints as 42."""
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, dict):
        return {key: whole_numbers_as_ints(item) for key, item in value.items()}
    if isinstance(value, list):
        return [whole_numbers_as_ints(item) for item in value]
    return value


def describe_part(part: Part) -> str:
    kind = part.WhichOneof("content")
    if kind == "text":
        return part.text
    if kind == "data":
        return json.dumps(whole_numbers_as_ints(MessageToDict(part.data)))
    if kind == "raw":
        return f"<{len(part.raw)} bytes {part.filename or ''} {part.media_type or ''}>".strip()
    return f"<file at {part.url}>"


def state_name(state: TaskState) -> str:
    name: str = TaskState.Name(state)
    return name.removeprefix("TASK_STATE_")


def describe(event: StreamResponse) -> str:
    """One line (or a few) per event, for a person watching."""
    kind = event.WhichOneof("payload")
    if kind == "message":
        return f"message: {get_message_text(event.message)}"
    if kind == "status_update":
        status = event.status_update.status
        said = get_message_text(status.message) if status.HasField("message") else ""
        return f"status {state_name(status.state)}" + (f": {said}" if said else "")
    if kind == "artifact_update":
        artifact = event.artifact_update.artifact
        parts = " ".join(describe_part(part) for part in artifact.parts)
        return f"artifact {artifact.name or artifact.artifact_id}: {parts}"
    task = event.task
    lines = [f"task {task.id} {state_name(task.status.state)}"]
    if task.status.HasField("message"):
        lines.append(f"  says: {get_message_text(task.status.message)}")
    for artifact in task.artifacts:
        parts = " ".join(describe_part(part) for part in artifact.parts)
        lines.append(f"  artifact {artifact.name or artifact.artifact_id}: {parts}")
    return "\n".join(lines)


async def list_agents(http: httpx.AsyncClient, endpoint: LocalEndpoint) -> list[dict[str, Any]]:
    response = await http.get(f"{endpoint.base_url}/a2a/v1/agents")
    if response.status_code == 401:
        raise ClientSetupError("the endpoint refused the token: it changed since it was read "
                               "(the node rotated it); run the client again")
    response.raise_for_status()
    agents: list[dict[str, Any]] = response.json()["agents"]
    return agents


async def resolve_card(http: httpx.AsyncClient, endpoint: LocalEndpoint, aid: str) -> AgentCard:
    resolver = A2ACardResolver(http, endpoint.card_url(aid))
    # The proxy card lives at the agent's URL itself, not below /.well-known: "/" means as is.
    return await resolver.get_agent_card(relative_card_path="/")


def agent_client(http: httpx.AsyncClient, card: AgentCard, streaming: bool) -> Client:
    """A client for the card's interfaces; the SDK sends A2A-Version: 1.0 on every call."""
    config = ClientConfig(httpx_client=http, streaming=streaming,
                          supported_protocol_bindings=BINDINGS)
    return ClientFactory(config).create(card)


def print_card(card: AgentCard) -> None:
    print(f"card: {card.name} - {card.description}")
    for interface in card.supported_interfaces:
        print(f"  {interface.protocol_binding:9} {interface.url}")
    for skill in card.skills:
        print(f"  skill {skill.id}: {skill.name}")


async def send_and_print(client: Client, text: str) -> None:
    async with asyncio.timeout(STEP_TIMEOUT_S):
        async for event in client.send_message(SendMessageRequest(message=user_message(text))):
            print(describe(event), flush=True)


async def start_then_cancel(client: Client, text: str) -> None:
    request = SendMessageRequest(message=user_message(text),
                                 configuration=SendMessageConfiguration(return_immediately=True))
    task_id = ""
    async with asyncio.timeout(STEP_TIMEOUT_S):
        async for event in client.send_message(request):
            print(describe(event), flush=True)
            task_id = event.task.id if event.WhichOneof("payload") == "task" else task_id
    if not task_id:
        print("the agent answered with a message; there is no task to cancel")
        return
    try:
        canceled = await client.cancel_task(CancelTaskRequest(id=task_id))
    except A2AError as error:  # e.g. TaskNotCancelableError: it finished first
        print(f"cancel refused: {type(error).__name__}: {error}")
        return
    print(f"canceled: task {canceled.id} {state_name(canceled.status.state)}")


async def run(args: argparse.Namespace) -> None:
    endpoint = LocalEndpoint.from_data_dir(default_data_dir())
    async with endpoint.http_client() as http:
        print(f"== agents at {endpoint.base_url}/a2a/v1/agents")
        agents = await list_agents(http, endpoint)
        for agent in agents:
            print(f"  {agent['aid']}  {agent.get('name', '(unverified)')}  "
                  f"{agent.get('verification', '')} {agent.get('charge', '')}".rstrip())
        aid = args.aid or (agents[0]["aid"] if agents else None)
        if aid is None:
            raise ClientSetupError("the node knows no remote agent yet; join a hub and trust "
                                   "one, or pass --aid")
        print(f"== proxy card {endpoint.card_url(aid)}")
        card = await resolve_card(http, endpoint, aid)
        print_card(card)
        async with agent_client(http, card, streaming=False) as client:
            print(f"== send: {args.text}")
            await send_and_print(client, args.text)
            if args.cancel:
                print("== start a task and cancel it")
                await start_then_cancel(client, args.text)
        if args.stream:
            print(f"== stream: {args.text}")
            async with agent_client(http, card, streaming=True) as client:
                await send_and_print(client, args.text)


def parse_arguments(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="List the remote agents of the local anet node and talk to one of them.")
    parser.add_argument("--aid", help="the remote agent (default: the first one listed)")
    parser.add_argument("--text", default=DEFAULT_TEXT, help="the message to send")
    parser.add_argument("--stream", action="store_true", help="also send it as a stream")
    parser.add_argument("--cancel", action="store_true", help="also start a task and cancel it")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    try:
        asyncio.run(run(parse_arguments(argv)))
    except ClientSetupError as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    except (A2AClientError, A2AError, httpx.HTTPError, TimeoutError) as error:
        print(f"error: {type(error).__name__}: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
