"""The official a2a-sdk 1.x client against the proxy card of a remote agent, over the whole
chain in real processes: node A's local endpoint -> a real hub -> node B -> B's backend, the TCK
scenario agent (an official a2a-sdk server) on a unix socket (see tests/e2e/chain.py).

One hub, two daemons and one backend serve the whole module: the tests only send tasks, each
with its own ids, and never change the nodes."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator

import httpx
import pytest
from a2a.client import A2ACardResolver, Client, ClientConfig, ClientFactory
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError

from tests.e2e.chain import Chain, running_chain
from tests.support.messages import sdk_user_message

pytest.importorskip("anet_a2a")

pytestmark = pytest.mark.timeout(120)

BINDINGS = ["JSONRPC", "HTTP+JSON"]
CALL_TIMEOUT_S = 30


@pytest.fixture(scope="module")
def chain() -> Iterator[Chain]:
    with running_chain() as running:
        yield running


def user(scenario: str, text: str = "hello", **ids: str) -> Message:
    """A message whose messageId picks the TCK agent's behaviour (any other prefix: echo)."""
    return sdk_user_message(text, f"{scenario}-{uuid.uuid4().hex}", **ids)


async def events(client: Client, request: SendMessageRequest) -> list:
    return [event async for event in client.send_message(request)]


def texts(message: Message) -> list[str]:
    return [part.text for part in message.parts if part.HasField("text")]


@pytest.fixture
async def http(chain: Chain) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(headers=chain.headers(), timeout=CALL_TIMEOUT_S) as client:
        yield client


async def make_client(http: httpx.AsyncClient, chain: Chain, binding: str,
                      streaming: bool) -> Client:
    return await ClientFactory(ClientConfig(
        httpx_client=http, streaming=streaming,
        supported_protocol_bindings=[binding])).create_from_url(chain.agent_url())


async def test_the_card_names_this_listener(chain: Chain, http: httpx.AsyncClient) -> None:
    card = await A2ACardResolver(http, chain.agent_url()).get_agent_card()
    assert [i.protocol_binding for i in card.supported_interfaces] == BINDINGS
    assert all(i.url.startswith(chain.agent_url()) for i in card.supported_interfaces)
    assert card.capabilities.streaming and not card.capabilities.push_notifications


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("streaming", [True, False])
async def test_sdk_client_every_operation(chain: Chain, http: httpx.AsyncClient, binding: str,
                                          streaming: bool) -> None:
    client = await make_client(http, chain, binding, streaming)
    sent = await events(client, SendMessageRequest(message=user("plain", "hello")))
    assert sent[0].WhichOneof("payload") == "task"
    task_id = sent[0].task.id
    task = await client.get_task(GetTaskRequest(id=task_id))
    assert task.status.state == TaskState.TASK_STATE_COMPLETED
    assert texts(task.status.message) == ["echo: hello"]
    with pytest.raises(TaskNotCancelableError):
        await client.cancel_task(CancelTaskRequest(id=task_id))
    with pytest.raises(TaskNotFoundError):
        await client.get_task(GetTaskRequest(id="no-such-task"))

    page = await client.list_tasks(ListTasksRequest(page_size=100))
    assert task_id in [t.id for t in page.tasks]

    # Multi-turn: the backend asks, the follow-up on the same task is answered.
    asked = await events(client, SendMessageRequest(message=user("tck-input-required")))
    asked_id = asked[0].task.id
    assert (await client.get_task(GetTaskRequest(id=asked_id))).status.state == \
        TaskState.TASK_STATE_INPUT_REQUIRED
    await events(client, SendMessageRequest(message=user("follow-up", "forty-two",
                                                         task_id=asked_id)))
    done = await client.get_task(GetTaskRequest(id=asked_id))
    assert done.status.state == TaskState.TASK_STATE_COMPLETED
    assert texts(done.status.message) == ["echo: forty-two"]

    # A long-running backend task: subscribe to it, then cancel it.
    unary = await make_client(http, chain, binding, streaming=False)
    slow = await events(unary, SendMessageRequest(
        message=user("test-resubscribe-message-id"),
        configuration=SendMessageConfiguration(return_immediately=True)))
    slow_id = slow[0].task.id
    if streaming:
        subscription = client.subscribe(SubscribeToTaskRequest(id=slow_id))
        first = await anext(subscription)
        assert first.WhichOneof("payload") == "task" and first.task.id == slow_id
        await subscription.aclose()
    canceled = await client.cancel_task(CancelTaskRequest(id=slow_id))
    assert canceled.status.state == TaskState.TASK_STATE_CANCELED
    await client.close()


@pytest.mark.parametrize("binding", BINDINGS)
@pytest.mark.parametrize("streaming", [True, False])
async def test_an_agent_that_answers_with_a_message(chain: Chain, http: httpx.AsyncClient,
                                                    binding: str, streaming: bool) -> None:
    client = await make_client(http, chain, binding, streaming)
    got = await events(client, SendMessageRequest(message=user("tck-message-response")))
    assert [event.WhichOneof("payload") for event in got] == ["message"]
    assert texts(got[0].message) == ["Direct message response"]
    assert got[0].message.role == Role.ROLE_AGENT
    await client.close()


@pytest.mark.parametrize("binding", BINDINGS)
async def test_a_stream_brings_artifacts_before_the_end(chain: Chain, http: httpx.AsyncClient,
                                                        binding: str) -> None:
    client = await make_client(http, chain, binding, streaming=True)
    got = await events(client, SendMessageRequest(message=user("tck-stream-artifact-chunked")))
    kinds = [event.WhichOneof("payload") for event in got]
    assert kinds[0] == "task" and kinds[-1] == "status_update"
    assert got[-1].status_update.status.state == TaskState.TASK_STATE_COMPLETED
    chunks = [part.text for event in got if event.WhichOneof("payload") == "artifact_update"
              for part in event.artifact_update.artifact.parts]
    assert "".join(chunks) == "chunk-1 chunk-2"
    task = await client.get_task(GetTaskRequest(id=got[0].task.id))
    assert [part.text for part in task.artifacts[0].parts] == ["chunk-1 ", "chunk-2"]
    await client.close()


async def test_file_bytes_reach_get_task_but_not_a_stream(chain: Chain,
                                                          http: httpx.AsyncClient) -> None:
    client = await make_client(http, chain, "JSONRPC", streaming=True)
    got = await events(client, SendMessageRequest(message=user("tck-stream-artifact-file")))
    streamed = [event.artifact_update.artifact.parts[0] for event in got
                if event.WhichOneof("payload") == "artifact_update"]
    assert streamed and not streamed[0].HasField("raw")
    described = dict(streamed[0].data.struct_value.fields)
    assert described["size"].number_value == 3
    assert described["mediaType"].string_value == "text/plain"
    assert described["filename"].string_value == "output.txt"
    task = await client.get_task(GetTaskRequest(id=got[0].task.id))
    assert task.artifacts[0].parts[0].raw == b"tck"
    await client.close()
