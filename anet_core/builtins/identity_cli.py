"""The node's keys and its evidence: ``anet keys rotate`` (through ``/tasks/keys/rotate`` while
the daemon runs, anet_core.builtins.identity_routes), ``anet evidence list``, ``show`` and
``verify``."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from anet_core import hookimpl
from anet_core.daemon import running_pid
from anet_core.errors import AnetError
from anet_core.records import CliCommand, ControlRoutes

if TYPE_CHECKING:
    from anet_core.cli.context import CliContext
    from anet_core.evidence import ReadRecord
    from anet_core.node import Node

# Identities and the evidence chain (libsodium, pydantic) load in the commands that read them.


@hookimpl
def anet_routes(node: Node) -> list[ControlRoutes]:
    from anet_core.builtins.identity_routes import routes  # the daemon's side, loaded there

    # Below /tasks/, beside the task routes: one prefix for what the operator does on the network.
    return [ControlRoutes(module="tasks", routes=[*routes])]


# --- commands ------------------------------------------------------------------------------------


def _run_evidence_verify(args: argparse.Namespace, ctx: CliContext) -> int:
    from anet_core.evidence import verify
    from anet_core.identity import Identity

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


def _when(record: dict[str, object]) -> str:
    stamp = record["ts"]
    assert isinstance(stamp, int)
    return datetime.fromtimestamp(stamp / 1000, UTC).isoformat(timespec="milliseconds") \
        .replace("+00:00", "Z")


def _read(ctx: CliContext, **filters: str | None) -> list[ReadRecord]:
    from anet_core.evidence import read_records
    from anet_core.identity import Identity

    identity = Identity.load(ctx.paths.identity)
    return read_records(ctx.paths.evidence_chain, identity.verified_history, **filters)


def _run_evidence_list(args: argparse.Namespace, ctx: CliContext) -> int:
    if args.limit < 1:
        raise AnetError("invalid-params", f"--limit {args.limit} shows nothing",
                        hint="give a number of records, 1 or more")
    found = _read(ctx, kind=args.kind, task=args.task)[-args.limit:]
    if args.json:
        ctx.print_json([read.as_dict() for read in found])
        return 0
    if not found:
        print("No record matches." if args.kind or args.task else "The evidence chain is empty.")
        return 0
    for read in found:
        record = read.record
        mark = f"  NOT VERIFIED: {read.problem}" if read.problem else ""
        print(f"{record['seq']:>6}  {_when(record)}  {record['kind']:<24} "
              f"{read.task_id or '-'}{mark}")
    print("\n`anet evidence show <seq>` shows one record; `anet evidence verify` checks the chain.")
    return 0


def _run_evidence_show(args: argparse.Namespace, ctx: CliContext) -> int:
    found = [read for read in _read(ctx) if read.record["seq"] == args.seq]
    if not found:
        raise AnetError("evidence-not-found", f"the evidence chain has no record seq {args.seq}",
                        hint="`anet evidence list` lists the records")
    if args.json:
        ctx.print_json([read.as_dict() for read in found] if len(found) > 1
                       else found[0].as_dict())
        return 0
    for read in found:
        record = read.record
        signed = "-" if read.signed_in is None else (
            "yes" if read.signed_in == record["seq"] else f"by record seq {read.signed_in}")
        for label, value in (("seq", record["seq"]), ("time", _when(record)),
                             ("kind", record["kind"]), ("signed", signed),
                             ("signer", record.get("signer", "-")),
                             ("key seq", record.get("keySeq", "-")), ("hash", record["hash"]),
                             ("prev", record["prev"] or "-"),
                             ("verified", "yes" if not read.problem else f"NO: {read.problem}")):
            print(f"{label:<9} {value}")
        for key, value in sorted(record["data"].items()):
            shown = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
            print(f"  {key:<14} {shown}")
    return 0


def _run_keys_rotate(args: argparse.Namespace, ctx: CliContext) -> int:
    from anet_core.identity import Identity

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

    def configure_list(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--kind", help="only this kind (task.forwarded), or a family "
                                           "(task.*)")
        parser.add_argument("--task", help="only the records of this task id")
        parser.add_argument("--limit", type=int, default=50,
                            help="the newest N records (default 50)")
        parser.add_argument("--json", action="store_true", help="print JSON")

    def configure_show(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("seq", type=int, help="the record's sequence number")
        parser.add_argument("--json", action="store_true", help="print JSON")

    return [
        CliCommand("evidence list", "the records of the evidence chain, newest last",
                   configure_list, _run_evidence_list, module="core"),
        CliCommand("evidence show", "one record of the evidence chain, in full", configure_show,
                   _run_evidence_show, module="core"),
        CliCommand("evidence verify", "check the evidence chain for changed, removed or "
                   "inserted records", lambda parser: None, _run_evidence_verify, module="core"),
        CliCommand("keys rotate", "rotate this node's keys (the AID stays)", configure_rotate,
                   _run_keys_rotate, module="core"),
    ]
