"""The module x402's MCP tools (x402_quote, x402_pay, x402_balance), spoken to by the official
MCP client, on the payer alice (every module, a running daemon) against a real hub process and
the real payee bob, whose module x402 quotes his priced skill. The agent tier is the daemon's:
the tool and its control route pay within it and nothing above it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("anet_mcp")

from mcp import Client
from mcp.types import CallToolResult

from anet_core.control.client import AsyncControlClient
from anet_core.errors import AnetError
from anet_core.node import Node
from anet_mcp.server import build_server, collect_tools
from anet_x402.signer_service import SIGNER
from tests.support.messages import user_message
from tests.support.payments import ledger_totals
from tests.support.waiting import eventually
from tests.x402.payee import SKILL, PaidPair, payer_and_payee
from tests.x402.paying import TIERS

pytestmark = pytest.mark.timeout(120)


@dataclass
class Network:
    pair: PaidPair
    control: AsyncControlClient
    client: Client

    @property
    def alice(self) -> Node:
        return self.pair.alice

    def task(self, task_id: str) -> dict[str, Any]:
        return self.pair.task(task_id)

    async def quoted(self) -> str:
        """A task of alice's for bob's priced skill, waiting with its quote."""
        task = await self.alice.tasks.send(self.pair.bob.aid, user_message("sum", "m-1"),
                                           skill=SKILL)
        await eventually(lambda: self.task(task["id"])["status"]["state"]
                         == "TASK_STATE_INPUT_REQUIRED", "quoted")
        return str(task["id"])

    async def tool(self, name: str, arguments: dict[str, Any] | None = None) -> CallToolResult:
        return await self.client.call_tool(name, arguments or {})


@asynccontextmanager
async def network(root: Path, price: str) -> AsyncIterator[Network]:
    """The payer and the payee, and an MCP client of alice's tools (every module's)."""
    async with payer_and_payee(root, price, TIERS) as pair, \
            AsyncControlClient(pair.alice.paths) as control, \
            Client(build_server(collect_tools(pair.alice_plugins), control,
                                version="test")) as client:
        yield Network(pair, control, client)


def transfers(root: Path) -> list[int]:
    return [entry.amount for entry in ledger_totals(root / "hub").transfers]


async def test_the_tools_are_listed_with_honest_annotations(tmp_path: Path) -> None:
    async with network(tmp_path, "0.50") as net:
        listed = {tool.name: tool.annotations for tool in (await net.client.list_tools()).tools}
    assert listed["x402_quote"].read_only_hint is True
    assert listed["x402_quote"].open_world_hint is False
    assert listed["x402_balance"].read_only_hint is True
    assert listed["x402_balance"].open_world_hint is True  # it asks the hub
    pay = listed["x402_pay"]
    assert pay.read_only_hint is False and pay.destructive_hint is True  # money leaves
    assert pay.idempotent_hint is True and pay.open_world_hint is True


async def test_a_quote_within_the_agent_tier_is_paid_by_the_tool_until_the_daily_limit(
        tmp_path: Path) -> None:
    async with network(tmp_path, "0.70") as net:
        first = await net.quoted()
        shown = await net.tool("x402_quote", {"taskId": first})
        assert not shown.is_error, shown.content[0].text
        [option] = shown.structured_content["options"]
        assert (option["amount"], option["asset"], option["tier"]) == ("0.70", "USD", "agent")
        assert shown.structured_content["reason"] == "payment_extension_not_activated"
        assert "x402_pay" in shown.content[0].text

        paid = await net.tool("x402_pay", {"taskId": first})
        assert not paid.is_error, paid.content[0].text
        assert paid.structured_content["tier"] == "agent"
        assert paid.structured_content["signedNow"] is True
        await eventually(lambda: net.task(first)["status"]["state"] == "TASK_STATE_COMPLETED",
                         "paid and worked")
        assert transfers(tmp_path) == [70]
        again = await net.tool("x402_pay", {"taskId": first})
        assert again.is_error  # the task waits for no payment any more: nothing paid twice
        assert again.structured_content["error"] == "no-quote"

        balance = await net.tool("x402_balance")
        assert balance.structured_content["balances"] == {"USD": "4.30"}

        # 0.70 more would make 1.40 today, above agent_daily_max 1.20: the operator's.
        second = await net.quoted()
        shown = await net.tool("x402_quote", {"taskId": second})
        assert shown.structured_content["options"][0]["tier"] == "operator"
        refused = await net.tool("x402_pay", {"taskId": second})
        assert refused.is_error
        assert refused.structured_content["error"] == "needs-operator-approval"
        assert f"anet pay {second}" in refused.structured_content["hint"]
        assert "0.70 paid today" in refused.structured_content["message"]
        assert net.task(second)["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"
    assert transfers(tmp_path) == [70]


async def test_above_the_agent_tier_neither_the_tool_nor_its_route_pays(tmp_path: Path) -> None:
    async with network(tmp_path, "2.00") as net:
        task_id = await net.quoted()
        shown = await net.tool("x402_quote", {"taskId": task_id})
        [option] = shown.structured_content["options"]
        assert option["tier"] == "operator"
        assert f"anet pay {task_id}" in option["wouldDo"]

        refused = await net.tool("x402_pay", {"taskId": task_id, "option": 0})
        assert refused.is_error
        assert refused.structured_content["error"] == "needs-operator-approval"
        # The route the tool calls enforces the tier itself, whatever its caller sends.
        for body in ({}, {"option": 0}, {"option": 0, "tier": "operator"}):
            with pytest.raises(AnetError) as direct:
                await net.control.post(f"/x402/agent-pay/{task_id}", body)
            assert direct.value.reason == "needs-operator-approval"
        assert transfers(tmp_path) == []
        assert net.alice[SIGNER].book.signed_for(task_id) == []
        assert net.task(task_id)["status"]["state"] == "TASK_STATE_INPUT_REQUIRED"

        # The operator's own route (anet pay) pays it.
        paid = await net.control.post(f"/x402/pay/{task_id}", {})
        assert paid["tier"] == "operator"
        await eventually(lambda: net.task(task_id)["status"]["state"]
                         == "TASK_STATE_COMPLETED", "paid by the operator")
    assert transfers(tmp_path) == [200]


async def test_bad_arguments_are_refused_before_the_daemon_is_asked(tmp_path: Path) -> None:
    async with network(tmp_path, "0.50") as net:
        for arguments in ({}, {"taskId": "no"}, {"taskId": "a" * 12, "option": -1},
                          {"taskId": "a" * 12, "tier": "operator"}):
            refused = await net.tool("x402_pay", arguments)
            assert refused.is_error, arguments
            assert refused.structured_content["error"] == "invalid-arguments", arguments
        unknown = await net.tool("x402_quote", {"taskId": "a" * 12})
        assert unknown.is_error and unknown.structured_content["error"] == "task-not-found"
    assert transfers(tmp_path) == []
