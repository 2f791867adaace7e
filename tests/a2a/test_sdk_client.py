"""The official a2a-sdk 1.x client against the proxy card of a remote node's agent."""

from __future__ import annotations

import uuid

import httpx
import pytest
from a2a.client import A2ACardResolver, ClientConfig, ClientFactory
from a2a.types import (
    CancelTaskRequest,
    GetTaskRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    SubscribeToTaskRequest,
    TaskState,
)
from a2a.utils.errors import TaskNotCancelableError, TaskNotFoundError

from tests.a2a.conftest import Local


def user(text: str, **ids: str) -> Message:
    return Message(role=Role.ROLE_USER, message_id=str(uuid.uuid4()), parts=[Part(text=text)],
                   **ids)


async def events(client, request) -> list:
    return [event async for event in client.send_message(request)]


@pytest.mark.parametrize("binding", ["JSONRPC", "HTTP+JSON"])
@pytest.mark.parametrize("streaming", [True, False])
async def test_sdk_client_every_operation(local: Local, binding: str, streaming: bool) -> None:
    async with httpx.AsyncClient(headers=local.headers(), timeout=30) as http:
        card = await A2ACardResolver(http, local.agent_url()).get_agent_card()
        assert [i.protocol_binding for i in card.supported_interfaces] == ["JSONRPC", "HTTP+JSON"]
        assert card.capabilities.streaming and not card.capabilities.push_notifications
        client = await ClientFactory(ClientConfig(
            httpx_client=http, streaming=streaming,
            supported_protocol_bindings=[binding])).create_from_url(local.agent_url())

        sent = await events(client, SendMessageRequest(message=user("hello")))
        kinds = [event.WhichOneof("payload") for event in sent]
        assert kinds[0] == "task"
        task_id = sent[0].task.id
        task = await client.get_task(GetTaskRequest(id=task_id))
        assert task.status.state == TaskState.TASK_STATE_COMPLETED
        assert task.artifacts[0].parts[0].text == "echo: hello"
        assert all(a.artifact_id != "preview-1" for a in task.artifacts)
        with pytest.raises(TaskNotCancelableError):
            await client.cancel_task(CancelTaskRequest(id=task_id))
        with pytest.raises(TaskNotFoundError):
            await client.get_task(GetTaskRequest(id="no-such-task"))

        page = await client.list_tasks(ListTasksRequest(page_size=10))
        assert task_id in [t.id for t in page.tasks]

        asked = await events(client, SendMessageRequest(message=user("ask me")))
        asked_id = asked[0].task.id
        assert (await client.get_task(GetTaskRequest(id=asked_id))).status.state == \
            TaskState.TASK_STATE_INPUT_REQUIRED
        await events(client, SendMessageRequest(message=user("forty-two", task_id=asked_id)))
        done = await client.get_task(GetTaskRequest(id=asked_id))
        assert done.status.state == TaskState.TASK_STATE_COMPLETED
        assert done.artifacts[-1].parts[0].text == "got: forty-two"

        # A stream goes on to the end whatever returnImmediately says: start it unary.
        unary = ClientFactory(ClientConfig(httpx_client=http, streaming=False,
                                           supported_protocol_bindings=[binding])).create(card)
        slow = await events(unary, SendMessageRequest(
            message=user("slow job"),
            configuration=SendMessageConfiguration(return_immediately=True)))
        slow_id = slow[0].task.id
        if streaming:
            subscription = client.subscribe(SubscribeToTaskRequest(id=slow_id))
            first = await anext(subscription)
            assert first.WhichOneof("payload") == "task"
            await subscription.aclose()
        canceled = await client.cancel_task(CancelTaskRequest(id=slow_id))
        assert canceled.status.state == TaskState.TASK_STATE_CANCELED
        await client.close()
