"""The control plane: loopback only, its own token, Host and Origin checks."""

from __future__ import annotations

import asyncio
import http.client
import json
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from anet_core import hookimpl
from anet_core.control.client import ControlClient
from anet_core.control.loopback import TokenFile
from anet_core.control.server import build_app
from anet_core.errors import AnetError
from anet_core.link import HubError
from anet_core.node import Node
from anet_core.records import ControlRoutes
from tests.support.nodes import open_node, plugins_with, running_node


@pytest.fixture
async def control(tmp_path: Path):
    async with running_node(tmp_path / "node") as node:
        address = node.paths.control_addr.read_text().strip()
        token = node.paths.control_token.read_text().strip()
        async with aiohttp.ClientSession() as session:
            yield session, address, token


async def get(session, url: str, **headers: str) -> int:
    async with session.get(url, headers=headers) as response:
        return response.status


async def test_status_needs_the_control_token(control) -> None:
    session, address, token = control
    url = f"http://{address}/core/status"
    assert await get(session, url, Authorization=f"Bearer {token}") == 200
    assert await get(session, url) == 401
    assert await get(session, url, Authorization="Bearer wrong") == 401
    assert await get(session, url, Authorization=f"Bearer  {token}") == 401
    assert await get(session, url, Authorization=f"Basic {token}") == 401


async def test_a_foreign_host_header_is_misdirected(control) -> None:
    session, address, token = control
    port = address.rsplit(":", 1)[1]
    url = f"http://{address}/core/status"
    auth = f"Bearer {token}"
    assert await get(session, url, Host=f"evil.example:{port}", Authorization=auth) == 421
    assert await get(session, url, Host="127.0.0.1:1", Authorization=auth) == 421
    assert await get(session, url, Host=f"localhost:{port}", Authorization=auth) == 200


async def test_a_request_from_a_web_page_is_forbidden(control) -> None:
    session, address, token = control
    status = await get(session, f"http://{address}/core/status", Origin="http://example.com",
                       Authorization=f"Bearer {token}")
    assert status == 403


async def test_the_control_plane_listens_on_loopback_only(control) -> None:
    _, address, _ = control
    assert address.startswith("127.0.0.1:")


# --- refusals: one error middleware for every module's routes -------------------------------------


class Refuser:
    """A throwaway module whose routes refuse, as module routes do."""

    routes = web.RouteTableDef()

    @staticmethod
    @routes.get("/anet-error")
    async def anet_error(request: web.Request) -> web.Response:
        raise AnetError("greeter-unhappy", "the greeting 'hi' is too short",
                        hint="set modules.greeter.greeting")

    @staticmethod
    @routes.get("/hub-error")
    async def hub_error(request: web.Request) -> web.Response:
        raise HubError("unreachable", "the hub at ws://127.0.0.1:9 is unreachable")

    @hookimpl
    def anet_routes(self, node: Node) -> list[ControlRoutes]:
        return [ControlRoutes(module="greeter", routes=list(self.routes))]


@pytest.fixture
async def refusing(tmp_path: Path):
    async with running_node(tmp_path / "node", plugins_with(Refuser())) as node:
        yield ControlClient(node.paths, timeout=10)


async def answer(client: ControlClient, method: str, path: str, body=None) -> tuple[int, dict]:
    """The raw status and JSON body of a control-plane call."""
    def call() -> tuple[int, dict]:
        host, _, port = client.paths.control_addr.read_text().strip().rpartition(":")
        token = client.paths.control_token.read_text().strip()
        connection = http.client.HTTPConnection(host, int(port), timeout=10)
        try:
            connection.request(method, path, body=None if body is None else json.dumps(body),
                               headers={"Authorization": f"Bearer {token}",
                                        "Content-Type": "application/json"})
            response = connection.getresponse()
            return response.status, json.loads(response.read())
        finally:
            connection.close()

    return await asyncio.to_thread(call)


async def test_a_module_route_that_raises_anet_error_answers_it_as_json(refusing) -> None:
    status, body = await answer(refusing, "GET", "/greeter/anet-error")
    assert status == 400
    assert body == {"error": "greeter-unhappy", "message": "the greeting 'hi' is too short",
                    "hint": "set modules.greeter.greeting", "detail": ""}
    with pytest.raises(AnetError) as refused:  # and the CLI's client raises it back
        await asyncio.to_thread(refusing.get, "/greeter/anet-error")
    assert refused.value.render() == ("error: the greeting 'hi' is too short\n"
                                      "hint: set modules.greeter.greeting")


async def test_a_hub_error_answers_hub_unavailable(refusing) -> None:
    status, body = await answer(refusing, "GET", "/greeter/hub-error")
    assert status == 502
    assert body["error"] == "hub-unavailable" and "ws://127.0.0.1:9" in body["message"]
    assert body["hint"] == "`anet status` shows the hub connection"


async def test_the_core_routes_refuse_bad_input_by_name(refusing) -> None:
    status, body = await answer(refusing, "POST", "/tasks/send", {"aid": "x"})
    assert status == 400 and body["error"] == "bad-request" and "text" in body["message"]
    status, body = await answer(refusing, "GET", "/tasks/task/no-such-task")
    assert status == 404 and body["error"] == "task-not-found"
    status, body = await answer(refusing, "GET", "/tasks/list?pageSize=many")
    assert status == 400 and body["message"] == "pageSize 'many' is not a number"
    status, body = await answer(refusing, "POST", "/hub/join", {"url": "ftp://hub.example"})
    assert status == 400 and body["error"] == "hub-bad-url" and "ftp" in body["message"]
    status, body = await answer(refusing, "POST", "/hub/join", {"address": "ws://h"})
    assert status == 400 and body["error"] == "bad-request"


async def test_the_task_directory_and_identity_routes_share_the_tasks_prefix(refusing) -> None:
    status, body = await answer(refusing, "GET", "/tasks/policy")
    assert status == 200 and body == {"policy": "trusted"}
    status, body = await answer(refusing, "POST", "/tasks/review", {"taskId": "t", "rating": 9})
    assert status == 400 and body["error"] == "bad-request" and "rating" in body["message"]
    status, body = await answer(refusing, "POST", "/tasks/keys/rotate", {"urgent": True})
    assert status == 400 and body["error"] == "bad-request" and "urgent" in body["message"]


async def test_a_route_added_twice_is_refused_naming_the_module(tmp_path: Path) -> None:
    async with open_node(tmp_path / "node", plugins=plugins_with(Refuser(), Refuser())) as node:
        with pytest.raises(AnetError) as refused:
            build_app(node, 1, TokenFile(tmp_path / "token"))
    assert refused.value.reason == "routes-duplicate"
    assert refused.value.message == ("the module greeter declares the control route "
                                     "GET /greeter/anet-error twice")
