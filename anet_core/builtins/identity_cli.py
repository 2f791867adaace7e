"""The node's keys and its evidence: ``anet keys rotate`` (through ``/tasks/keys/rotate`` while
the daemon runs) and ``anet evidence verify``."""

from __future__ import annotations

import argparse
import asyncio

from aiohttp import web

from anet_core import hookimpl
from anet_core.cli.context import CliContext
from anet_core.control.parsing import RequestBody, read_body
from anet_core.daemon import running_pid
from anet_core.evidence import verify
from anet_core.identity import Identity
from anet_core.node import NODE_KEY, Node
from anet_core.records import CliCommand, ControlRoutes

# --- control routes ------------------------------------------------------------------------------

routes = web.RouteTableDef()


class RotateRequest(RequestBody):
    emergency: bool = False


@routes.post("/keys/rotate")
async def rotate(request: web.Request) -> web.Response:
    body = await read_body(request, RotateRequest)
    node: Node = request.config_dict[NODE_KEY]
    history = await asyncio.to_thread(node.identity.rotate, body.emergency)
    notes = node.plugins.after_key_rotation(node.paths, node.identity, body.emergency)
    # The hub takes a new key history at registration; the card follows, signed anew.
    await node.hub.reregister()
    return web.json_response({"aid": node.aid, "keySeq": history.key_seq,
                              "emergency": body.emergency, "notes": notes})


@hookimpl
def anet_routes(node: Node) -> list[ControlRoutes]:
    # Below /tasks/, beside the task routes: one prefix for what the operator does on the network.
    return [ControlRoutes(module="tasks", routes=[*routes])]


# --- commands ------------------------------------------------------------------------------------


def _run_evidence_verify(args: argparse.Namespace, ctx: CliContext) -> int:
    identity = Identity.load(ctx.paths.identity)
    report = verify(ctx.paths.evidence_chain, identity.verified_history)
    if report.ok:
        print(f"evidence chain OK: {report.records} records, signed by {identity.aid}")
        return 0
    print(f"evidence chain has {len(report.issues)} problem(s) in {report.records} records:")
    for issue in report.issues:
        where = f" (seq {issue.seq})" if issue.seq is not None else ""
        print(f"  {issue.reason}{where}: {issue.detail}")
    return 1


def _run_keys_rotate(args: argparse.Namespace, ctx: CliContext) -> int:
    if running_pid(ctx.paths) is not None:
        result = ctx.daemon.post("/tasks/keys/rotate", {"emergency": args.emergency})
        key_seq, notes = result["keySeq"], result.get("notes", [])
        tail = "; the card was republished"
    else:
        identity = Identity.load(ctx.paths.identity)
        key_seq = identity.rotate(emergency=args.emergency).key_seq
        notes = ctx.plugins.after_key_rotation(ctx.paths, identity, args.emergency)
        tail = "; the card is republished when the node next connects"
    kind = "emergency rotation (signed by the recovery key)" if args.emergency else "rotation"
    print(f"key {kind} done: now at key seq {key_seq}{tail}")
    for note in notes:
        print(note)
    return 0


@hookimpl
def anet_cli_commands() -> list[CliCommand]:
    def configure_rotate(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--emergency", action="store_true",
                            help="rotate with the recovery key: the old keys are revoked")

    return [
        CliCommand("evidence verify", "check the evidence chain for changed, removed or "
                   "inserted records", lambda parser: None, _run_evidence_verify, module="core"),
        CliCommand("keys rotate", "rotate this node's keys (the AID stays)", configure_rotate,
                   _run_keys_rotate, module="core"),
    ]
