"""The module's MCP tools (``anet_mcp_tools``): a task's quote, paying it within the agent tier,
the node's credit. They reach the daemon through its control routes (anet_x402.signer_routes,
anet_x402.balance); the agent tier is enforced there, not here (docs/payments.md, "Paying from
an MCP host").
"""

from __future__ import annotations

from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field

from anet_core.api import McpCall, McpResult, McpTool
from anet_core.protocol.tasks import TASK_ID_PATTERN

MODULE = "x402"


def _task_id(value: str) -> str:
    if not TASK_ID_PATTERN.match(value):
        raise ValueError("not a task id (8-64 characters of A-Z, a-z, 0-9, _ and -); "
                         "list_tasks shows the ids of the tasks this node sent")
    return value


TaskId = Annotated[str, AfterValidator(_task_id), Field(
    alias="taskId", description="a task this node sent that waits for payment (input-required)")]


class Arguments(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)


class QuoteArguments(Arguments):
    task_id: TaskId


class PayArguments(Arguments):
    task_id: TaskId
    option: int | None = Field(default=None, ge=0, description=(
        "the option's number from x402_quote; needed when the quote has several"))


class NoArguments(Arguments):
    pass


async def quote(arguments: QuoteArguments, call: McpCall) -> McpResult:
    shown = await call.control.get(f"/x402/quote/{arguments.task_id}")
    lines = [f"Task {shown['taskId']} of {shown['peer']} asks for payment"
             + (f" (anet.reason {shown['reason']})" if shown.get("reason") else "") + ":"]
    for entry in shown["options"]:
        if "amount" in entry:
            lines.append(f"- option {entry['option']}: {entry['amount']} {entry['asset']} to "
                         f"{entry['payTo']} at the rail of hub {entry['rail']}; tier "
                         f"{entry['tier']}: {entry['wouldDo']}")
        else:
            lines.append(f"- option {entry['option']}: not payable by this node: "
                         f"{entry['problem']}")
    return McpResult("\n".join(lines), shown)


async def pay(arguments: PayArguments, call: McpCall) -> McpResult:
    await call.progress("signing the payment within the agent tier")
    body = {} if arguments.option is None else {"option": arguments.option}
    paid = await call.control.post(f"/x402/agent-pay/{arguments.task_id}", body)
    again = "" if paid["signedNow"] else " (the authorization signed earlier, sent again)"
    return McpResult(f"Paid {paid['amount']} {paid['asset']} for task {paid['taskId']}{again}; "
                     f"the task is {paid['state']}. get_task with wait=true follows it to its "
                     "answer.", paid)


async def balance(arguments: NoArguments, call: McpCall) -> McpResult:
    found = await call.control.get("/x402/balance")
    held = ", ".join(f"{amount} {asset}" for asset, amount in sorted(found["balances"].items()))
    return McpResult(f"Credit of {found['aid']} at the rail of hub {found['hub']}: "
                     f"{held or 'none'}.", found)


def x402_tools() -> list[McpTool]:
    return [
        McpTool("x402_quote", "Show the quote of a task waiting for payment: each option's "
                "amount, asset and rail, and whether the node, the agent or only the operator "
                "may pay it.", QuoteArguments, quote, title="Quote of a task", read_only=True,
                open_world=False, module=MODULE),
        McpTool("x402_pay", "Pay a task's quote within the agent tier (agent_max, "
                "agent_daily_max); above it the operator pays on a terminal with anet pay.",
                PayArguments, pay, title="Pay a task", idempotent=True, module=MODULE),
        McpTool("x402_balance", "Show this node's credit at its home hub's payment rail.",
                NoArguments, balance, title="Credit at the rail", read_only=True,
                module=MODULE),
    ]
