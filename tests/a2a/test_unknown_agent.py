"""An AID the node does not know is "no such agent" on every route, the task routes included."""

from __future__ import annotations

import json

from tests.a2a.local import Local, rpc
from tests.support.messages import user_message

UNKNOWN = "b" * 32


async def test_an_unknown_agent_is_no_such_agent_everywhere(local: Local, http) -> None:
    url = local.agent_url(UNKNOWN)
    for path in ("", "/.well-known/agent-card.json", "/rest/tasks", "/rest/tasks/t-1",
                 "/rest/extendedAgentCard"):
        async with http.get(url + path, headers=local.headers()) as response:
            assert response.status == 404, path
            assert "No such agent" in (await response.json())["error"]["message"], path
    for method, params in (("ListTasks", {}), ("GetTask", {"id": "t-1"}),
                           ("CancelTask", {"id": "t-1"}),
                           ("SendMessage", {"message": user_message("x")})):
        body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}
        async with http.post(url + "/jsonrpc", data=json.dumps(body),
                             headers=local.headers(**{"Content-Type": "application/json"})
                             ) as response:
            error = (await response.json())["error"]
        assert error["code"] == -32601 and "No such agent" in error["message"], method


async def test_a_known_agent_lists_its_tasks_even_when_the_directory_forgot_it(
        local: Local, http) -> None:
    assert (await rpc(http, local, "ListTasks", {}))["result"]["tasks"] == []  # known, no tasks
    sent = await rpc(http, local, "SendMessage", {"message": user_message("inbox please"),
                                                  "configuration": {"returnImmediately": True}})
    task_id = sent["result"]["task"]["id"]
    del local.node.hub.hub.identities[local.remote.aid]  # the hub no longer has the agent
    listed = (await rpc(http, local, "ListTasks", {}))["result"]["tasks"]
    assert [task["id"] for task in listed] == [task_id]
