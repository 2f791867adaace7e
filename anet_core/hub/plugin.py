"""The hub as a built-in plugin: ``anet hub ...``, ``anet join``, ``/hub/`` routes, doctor check."""

from __future__ import annotations

import argparse
import asyncio
import datetime
from pathlib import Path

from aiohttp import web

from anet_core import hookimpl
from anet_core.cli.context import CliContext
from anet_core.config import read_raw, write_config
from anet_core.daemon import configure_logging, running_pid
from anet_core.doctor import CheckContext
from anet_core.durations import parse_duration
from anet_core.errors import AnetError
from anet_core.node import NODE_KEY, Node
from anet_core.records import CheckResult, CheckStatus, CliCommand, ControlRoutes, DoctorCheck

MIB = 1024 * 1024


# -- anet hub -------------------------------------------------------------------------------------


def _configure_hub(parser: argparse.ArgumentParser) -> None:
    from anet_core.hub import server

    sub = parser.add_subparsers(dest="hub_command", metavar="SUBCOMMAND", required=True)
    serve = sub.add_parser("serve", help="run a hub in the foreground (Ctrl-C or SIGTERM stops it)")
    serve.add_argument("--listen", required=True, metavar="HOST:PORT",
                       help="address to listen on, e.g. 0.0.0.0:8765 or 127.0.0.1:8765")
    serve.add_argument("--data", required=True, metavar="DIR",
                       help="the hub's data directory (operator key, hub.db); created if missing")
    serve.add_argument("--approval", action="store_true",
                       help="new nodes wait for `anet hub approve <aid>`")
    serve.add_argument("--public-url", metavar="URL",
                       help="the URL nodes use, when a proxy makes it differ from HOST:PORT")
    serve.add_argument("--max-envelope-bytes", type=int, metavar="N",
                       default=server.DEFAULT_MAX_ENVELOPE_BYTES,
                       help="largest envelope a node may send (default %(default)s = 16 MiB)")
    serve.add_argument("--rate", type=float, metavar="PER_SECOND",
                       default=server.DEFAULT_RATE_PER_SECOND,
                       help="requests per second per node (default %(default)s)")
    serve.add_argument("--burst", type=int, default=server.DEFAULT_BURST,
                       help="requests a node may make at once above the rate "
                            "(default %(default)s)")
    serve.add_argument("--queue-ttl", default="168h", metavar="DURATION",
                       help="how long envelopes wait for an offline node (default 168h, "
                            "the most recipients accept)")
    serve.add_argument("--max-storage-mb", type=int, metavar="MB",
                       help="cap hub.db at this size; writes beyond it are refused as "
                            "hub-storage-full")

    for name, text in (("approve", "let a pending node register"),
                       ("pending", "list nodes waiting for approval")):
        child = sub.add_parser(name, help=text)
        if name == "approve":
            child.add_argument("aid")
        child.add_argument("--data", required=True, metavar="DIR", help="the hub's data directory")
        if name == "pending":
            child.add_argument("--json", action="store_true", help="print JSON")

    official = sub.add_parser("official", help="the operator-signed list of official agents")
    official.add_argument("action", choices=("add", "remove", "list"))
    official.add_argument("aid", nargs="?")
    official.add_argument("--data", required=True, metavar="DIR", help="the hub's data directory")


def _run_hub(args: argparse.Namespace, ctx: CliContext) -> int:
    from anet_core.hub import admin

    data = Path(args.data).expanduser().absolute()
    if args.hub_command == "serve":
        return _serve(args, ctx, data)
    if args.hub_command == "approve":
        admin.approve(data, args.aid)
        print(f"Approved {args.aid}; if it is connected, it is registered within a second.")
        return 0
    if args.hub_command == "pending":
        waiting = admin.pending(data)
        if args.json:
            ctx.print_json([{"aid": agent.aid, "firstSeen": agent.first_seen,
                             "name": agent.name} for agent in waiting])
            return 0
        if not waiting:
            print("No node is waiting for approval.")
        for agent in waiting:
            since = datetime.datetime.fromtimestamp(agent.first_seen, datetime.UTC)
            print(f"  {agent.aid}  since {since.isoformat(timespec='seconds')}  "
                  f"{agent.name or '(no card yet)'}")
        return 0
    if args.action == "list":
        members = admin.official(data)
    elif not args.aid:
        raise AnetError("hub-missing-aid", f"`anet hub official {args.action}` needs an AID")
    else:
        members = admin.change_official(data, args.aid, add=args.action == "add")
    print("\n".join(members) if members else "The official list is empty.")
    return 0


def _serve(args: argparse.Namespace, ctx: CliContext, data: Path) -> int:
    from anet_core.hub import server

    try:
        host, port = server.parse_listen(args.listen)
        config = server.HubConfig(
            data_dir=data, approval=args.approval, max_envelope_bytes=args.max_envelope_bytes,
            rate_per_second=args.rate, burst=args.burst,
            queue_ttl_s=parse_duration(args.queue_ttl).total_seconds(),
            public_url=args.public_url,
            max_storage_bytes=args.max_storage_mb * MIB if args.max_storage_mb else None)
    except ValueError as error:
        raise AnetError("hub-bad-option", str(error), hint="see `anet hub serve --help`") from None
    configure_logging(ctx.settings, to_file=None)
    try:
        asyncio.run(server.serve(config, host, port))
    except OSError as error:
        raise AnetError("hub-listen-failed", f"cannot listen on {args.listen}: {error.strerror}",
                        hint="pick another port, or stop what uses this one") from None
    return 0


# -- anet join ------------------------------------------------------------------------------------


def _run_join(args: argparse.Namespace, ctx: CliContext) -> int:
    from anet_core.hub.client import normalize_hub_url, pin_path

    try:
        url = normalize_hub_url(args.url)
    except ValueError as error:
        raise AnetError("hub-bad-url", str(error)) from None
    raw = read_raw(ctx.paths.config)
    raw.setdefault("hub", {})["url"] = url
    write_config(ctx.paths.config, raw)
    # Joining is the operator's explicit trust decision: the hub met next is pinned afresh.
    pin_path(ctx.paths.root).unlink(missing_ok=True)
    print(f"Recorded {url} as this node's home hub in {ctx.paths.config}.")
    if running_pid(ctx.paths) is None:
        print("Start the node with `anet up`; it registers at the hub then.")
        return 0
    status = ctx.daemon.post("/hub/join", {"url": url})
    print(status["sentence"])
    return 0


@hookimpl
def anet_cli_commands() -> list[CliCommand]:
    return [
        CliCommand("hub", "run a hub and administer it (serve, approve, pending, official)",
                   configure=_configure_hub, run=_run_hub,
                   description="A hub relays sealed envelopes between nodes, keeps the directory "
                               "and stores envelopes for offline nodes. See docs/hub.md."),
        CliCommand("join", "make a hub this node's home hub and register there",
                   configure=lambda parser: parser.add_argument(
                       "url", help="the hub's URL, e.g. ws://hub.example.org:8765"),
                   run=_run_join),
    ]


# -- control routes -------------------------------------------------------------------------------

routes = web.RouteTableDef()


@routes.get("/status")
async def hub_status(request: web.Request) -> web.Response:
    return web.json_response(request.config_dict[NODE_KEY].hub.status.as_dict())


@routes.post("/join")
async def hub_join(request: web.Request) -> web.Response:
    from anet_core.hub.client import HubClient

    node = request.config_dict[NODE_KEY]
    body = await request.json()
    url = body.get("url") if isinstance(body, dict) else None
    if not isinstance(url, str) or not isinstance(node.hub, HubClient):
        return web.json_response({"error": "hub-bad-request",
                                  "message": "POST /hub/join takes {\"url\": \"ws://...\"}"},
                                 status=400)
    try:
        status = await node.hub.rejoin(url)
    except ValueError as error:
        return web.json_response({"error": "hub-bad-url", "message": str(error)}, status=400)
    return web.json_response(status.as_dict())


@hookimpl
def anet_routes(node: Node) -> list[ControlRoutes]:
    return [ControlRoutes(module="hub", routes=list(routes))]


# -- doctor ---------------------------------------------------------------------------------------


async def hub_connection(ctx: CheckContext) -> CheckResult:
    status = ctx.daemon_status()
    if status is None:
        return CheckResult(CheckStatus.SKIP, "the daemon is not running",
                           hint="start it with `anet up`")
    hub = status.get("hub") or {}
    state, text = hub.get("state"), hub.get("sentence", "the daemon reports no hub link")
    if state == "registered":
        return CheckResult(CheckStatus.OK, text)
    if state == "not-joined":
        return CheckResult(CheckStatus.WARN, text, hint="run `anet join <hub-url>`")
    if state == "pending":
        return CheckResult(CheckStatus.WARN, text,
                           hint=f"ask the hub operator to run `anet hub approve {status['aid']}`")
    return CheckResult(CheckStatus.FAIL, text,
                       hint="check the URL in config.json (hub.url) and the network; "
                            "the daemon's log says why the hub is unreachable")


@hookimpl
def anet_doctor_checks() -> list[DoctorCheck]:
    return [DoctorCheck("hub-connection", "core", "the node is registered at its home hub",
                        hub_connection)]
