"""The skill a new task is for (docs/a2a.md, "Sending a task"): the message metadata
``anet.skill``, checked against the remote agent's verified card; the card's only skill when
the client names none; a clear error for a skill the card does not list, nothing sent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.a2a.local import Local, rpc, two_nodes
from tests.support.waiting import eventually


def skills(*ids: str) -> dict[str, Any]:
    return {"name": "b", "skills": [{"id": skill, "name": skill} for skill in ids]}


def with_card(local: Local, card: dict[str, Any]) -> None:
    local.node.hub.hub.cards[local.remote.aid] = card  # type: ignore[attr-defined]


async def sent(http, local: Local, text: str, **metadata: Any) -> dict[str, Any]:
    message = {"role": "ROLE_USER", "messageId": f"m-{text}", "parts": [{"text": text}]}
    if metadata:
        message["metadata"] = metadata
    return await rpc(http, local, "SendMessage", {
        "message": message, "configuration": {"returnImmediately": True}})


async def skill_seen(local: Local, text: str) -> str | None:
    task = await eventually(lambda: next(
        (task for task in local.agent.seen if task.message["parts"][0]["text"] == text), None),
        f"b got {text}")
    return task.skill


async def test_the_cards_only_skill_is_the_tasks(tmp_path: Path, http) -> None:
    async with two_nodes(tmp_path) as local:
        with_card(local, skills("echo"))
        answer = await sent(http, local, "one")
        assert "result" in answer, answer
        assert await skill_seen(local, "one") == "echo"


async def test_a_named_skill_is_the_tasks_and_none_named_is_none(tmp_path: Path,
                                                                 http) -> None:
    async with two_nodes(tmp_path) as local:
        with_card(local, skills("echo", "summarize"))
        await sent(http, local, "named", **{"anet.skill": "summarize"})
        assert await skill_seen(local, "named") == "summarize"
        await sent(http, local, "unnamed")
        assert await skill_seen(local, "unnamed") is None


@pytest.mark.parametrize("named", ["translate", "", 7])
async def test_a_skill_the_card_does_not_list_is_refused(tmp_path: Path, http,
                                                         named: Any) -> None:
    async with two_nodes(tmp_path) as local:
        with_card(local, skills("echo", "summarize"))
        answer = await sent(http, local, "refused", **{"anet.skill": named})
        error = answer["error"]
        assert error["code"] == -32602, error  # invalid params
        assert repr(named) in error["message"] and "echo, summarize" in error["message"]
        assert local.node.tasks.list()["tasks"] == [] and local.agent.seen == []


async def test_without_a_verified_card_the_named_skill_goes_as_given(tmp_path: Path,
                                                                     http) -> None:
    async with two_nodes(tmp_path) as local:  # the directory gives no card
        await sent(http, local, "blind", **{"anet.skill": "anything"})
        assert await skill_seen(local, "blind") == "anything"
