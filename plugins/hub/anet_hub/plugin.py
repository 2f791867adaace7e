"""The hub module's hooks: ``anet hub serve|approve|pending|official|credit|ledger|doctor``."""

from __future__ import annotations

import argparse
import datetime
from pathlib import Path
from typing import TYPE_CHECKING

from anet_core.api import AnetError, CliCommand, hookimpl

if TYPE_CHECKING:
    from anet_core.api import CliContext

MIB = 1024 * 1024


# -- anet hub -------------------------------------------------------------------------------------


def _configure_hub(parser: argparse.ArgumentParser) -> None:
    from anet_core.api import EVENT_LOOPS
    from anet_hub import defaults

    sub = parser.add_subparsers(dest="hub_command", metavar="SUBCOMMAND", required=True)
    serve = sub.add_parser("serve", help="run a hub in the foreground (Ctrl-C or SIGTERM stops it)")
    serve.add_argument("--listen", required=True, metavar="HOST:PORT",
                       help="address to listen on, e.g. 0.0.0.0:8765 or 127.0.0.1:8765")
    serve.add_argument("--data", required=True, metavar="DIR",
                       help="the hub's data directory (operator key, hub.db); created if missing")
    serve.add_argument("--approval", action="store_true",
                       help="new nodes wait for `anet hub approve <aid>`")
    serve.add_argument("--public-url", metavar="URL",
                       help="the URL nodes use, when a proxy makes it differ from HOST:PORT; "
                            "advertised to nodes, who fail over to every instance's")
    serve.add_argument("--max-envelope-bytes", type=int, metavar="N",
                       default=defaults.DEFAULT_MAX_ENVELOPE_BYTES,
                       help="largest envelope a node may send (default %(default)s = 16 MiB)")
    serve.add_argument("--rate", type=float, metavar="PER_SECOND",
                       default=defaults.DEFAULT_RATE_PER_SECOND,
                       help="requests per second per node (default %(default)s)")
    serve.add_argument("--burst", type=int, default=defaults.DEFAULT_BURST,
                       help="requests a node may make at once above the rate "
                            "(default %(default)s)")
    serve.add_argument("--queue-ttl", default="168h", metavar="DURATION",
                       help="how long envelopes wait for an offline node (default 168h, "
                            "the most recipients accept)")
    serve.add_argument("--heartbeat", default=f"{defaults.DEFAULT_HEARTBEAT_S:g}s",
                       metavar="DURATION",
                       help="ping a node or federated hub silent for this long; no pong within "
                            "half of it ends its connection (default %(default)s)")
    serve.add_argument("--max-storage-mb", type=int, metavar="MB",
                       help="cap hub.db at this size; writes beyond it are refused as "
                            "hub-storage-full")
    serve.add_argument("--postgres", metavar="URL",
                       help="keep everything in this PostgreSQL database instead of hub.db "
                            "(postgresql://USER@HOST:PORT/DB[?sslmode=verify-full&sslrootcert="
                            "CA]; the password in PGPASSWORD or a PGPASSFILE); remembered in "
                            "DIR/cluster.json")
    serve.add_argument("--nats", metavar="URL[,URL]",
                       help="route envelopes between the instances of this hub over NATS "
                            "(nats://HOST:4222, tls://… for TLS); needs --postgres; credentials "
                            "from NATS_USER and NATS_PASSWORD, NATS_TOKEN, NATS_NKEY or "
                            "NATS_CREDS, TLS files from NATS_CA, NATS_CERT and NATS_KEY")
    serve.add_argument("--loop", choices=EVENT_LOOPS, default="auto",
                       help="the event loop: uvloop (pip install 'anet-hub[fast]'), asyncio, or "
                            "auto, uvloop when installed (default %(default)s)")
    serve.add_argument("--federate", action="append", default=[], metavar="AID@URL[,URL]",
                       help="forward to and accept forwards from the hub AID at URL "
                            "(ws://HOST:PORT), whose operator names this hub too, or at the "
                            "URLs of its other instances after commas; repeatable")
    serve.add_argument("--federation-rate", type=float, metavar="PER_SECOND",
                       default=defaults.DEFAULT_FEDERATION_RATE_PER_SECOND,
                       help="requests per second from each federated hub (default %(default)s)")
    serve.add_argument("--federation-burst", type=int, default=defaults.DEFAULT_FEDERATION_BURST,
                       help="requests a federated hub may make at once above the rate "
                            "(default %(default)s)")

    for name, text in (("approve", "let a pending node register"),
                       ("pending", "list nodes waiting for approval")):
        child = sub.add_parser(name, help=text)
        if name == "approve":
            child.add_argument("aid")
        child.add_argument("--data", required=True, metavar="DIR", help="the hub's data directory")
        if name == "pending":
            child.add_argument("--json", action="store_true", help="print JSON")

    credit = sub.add_parser("credit", help="add credit to an agent's balance at this hub's "
                                           "payment rail")
    credit.add_argument("aid", help="the agent credited (its node's `anet status` shows it)")
    credit.add_argument("amount", help='a positive decimal amount, e.g. "5.00"')
    credit.add_argument("--asset", default="USD", help="the asset (default %(default)s; "
                                                       "EUR, USDC)")
    credit.add_argument("--data", required=True, metavar="DIR", help="the hub's data directory")
    ledger = sub.add_parser("ledger", help="the rail's ledger: every credit and transfer, and "
                                           "the balances")
    ledger.add_argument("--data", required=True, metavar="DIR", help="the hub's data directory")
    ledger.add_argument("--json", action="store_true", help="print JSON")

    identity = sub.add_parser("identity", help="print the hub's AID (what another operator "
                                               "names in --federate), making its key if there "
                                               "is none yet")
    identity.add_argument("--data", required=True, metavar="DIR", help="the hub's data directory")
    identity.add_argument("--json", action="store_true", help="print JSON")

    doctor = sub.add_parser("doctor", help="say which of the hub's dependencies is down")
    doctor.add_argument("--data", required=True, metavar="DIR", help="the hub's data directory")
    doctor.add_argument("--url", metavar="URL",
                        help="a running instance to ask too, e.g. http://127.0.0.1:8765")
    doctor.add_argument("--json", action="store_true", help="print JSON")

    official = sub.add_parser("official", help="the operator-signed list of official agents")
    official.add_argument("action", choices=("add", "remove", "list"))
    official.add_argument("aid", nargs="?")
    official.add_argument("--data", required=True, metavar="DIR", help="the hub's data directory")


def _run_hub(args: argparse.Namespace, ctx: CliContext) -> int:
    data = Path(args.data).expanduser().absolute()
    if args.hub_command == "serve":
        return _serve(args, ctx, data)
    if args.hub_command == "doctor":
        return _doctor(args, ctx, data)
    if args.hub_command == "identity":
        return _identity(args, ctx, data)
    from anet_hub import admin  # the operator's commands; a serving hub never runs them

    if args.hub_command == "approve":
        admin.approve(data, args.aid)
        print(f"Approved {args.aid}; if it is connected, it is registered within a second.")
        return 0
    if args.hub_command in ("credit", "ledger"):
        return _ledger_command(args, ctx, data)
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


def _ledger_command(args: argparse.Namespace, ctx: CliContext, data: Path) -> int:
    from anet_core.protocol.amounts import format_amount
    from anet_hub import admin

    if args.hub_command == "credit":
        done = admin.credit(data, args.aid, args.amount, args.asset)
        print(f"Credited {format_amount(done.entry.amount, args.asset)} {args.asset} to "
              f"{args.aid} (entry {done.entry.seq}); balance "
              f"{format_amount(done.balance, args.asset)} {args.asset}.")
        return 0
    listing = admin.ledger(data)
    if args.json:
        ctx.print_json({"entries": [entry.as_dict() for entry in listing.entries],
                        "balances": [{"aid": item.aid, "asset": item.asset,
                                      "amount": format_amount(item.amount, item.asset)}
                                     for item in listing.balances]})
        return 0
    if not listing.entries:
        print("The ledger is empty: `anet hub credit <aid> <amount>` adds credit.")
        return 0
    for entry in listing.entries:
        when = datetime.datetime.fromtimestamp(entry.created, datetime.UTC)
        source = entry.payer or "operator"
        task = f"  task {entry.task}" if entry.task else ""
        print(f"  {entry.seq:>5}  {when.isoformat(timespec='seconds')}  {entry.kind.value:8}  "
              f"{format_amount(entry.amount, entry.asset):>12} {entry.asset:4}  {source} -> "
              f"{entry.payee}{task}")
    print("Balances:")
    for item in listing.balances:
        print(f"  {item.aid}  {format_amount(item.amount, item.asset):>12} {item.asset}")
    return 0


def _serve(args: argparse.Namespace, ctx: CliContext, data: Path) -> int:
    from anet_core.api import (  # pydantic: when the hub runs
        configure_logging,
        parse_duration,
        run_event_loop,
    )
    from anet_hub import app as server
    from anet_hub.deployment import Deployment
    from anet_hub.federation import FederationLimits, PeerHub
    from anet_hub.storage import StorageError

    try:
        host, port = server.parse_listen(args.listen)
        # Without the options, the data directory's own record: a restarted instance of a
        # cluster must not come back as an embedded hub with the same key.
        deployment = (Deployment(postgres=args.postgres, nats=args.nats)
                      if args.postgres or args.nats else Deployment.read(data))
        config = server.HubConfig(
            data_dir=data, approval=args.approval, max_envelope_bytes=args.max_envelope_bytes,
            rate_per_second=args.rate, burst=args.burst,
            queue_ttl_s=parse_duration(args.queue_ttl).total_seconds(),
            public_url=args.public_url,
            max_storage_bytes=args.max_storage_mb * MIB if args.max_storage_mb else None,
            deployment=deployment,
            federate=tuple(PeerHub.parse(spec) for spec in args.federate),
            federation_limits=FederationLimits(args.federation_rate, args.federation_burst),
            heartbeat_s=parse_duration(args.heartbeat).total_seconds())
    except ValueError as error:
        raise AnetError("hub-bad-option", str(error), hint="see `anet hub serve --help`") from None
    configure_logging(ctx.settings, to_file=None)
    data.mkdir(parents=True, exist_ok=True)
    deployment.write(data)
    try:
        run_event_loop(lambda: server.serve(config, host, port), args.loop, refusal=AnetError(
            "hub-no-uvloop", "--loop uvloop: uvloop is not installed",
            hint="pip install 'anet-hub[fast]', or run with --loop asyncio (or auto)"))
    except StorageError as error:
        raise AnetError(error.reason, f"{error.message} ({error.reason})",
                        hint="start the storage first; `anet hub doctor --data DIR` says what "
                             "is down") from None
    except OSError as error:
        raise AnetError("hub-listen-failed", f"cannot listen on {args.listen}: {error.strerror}",
                        hint="pick another port, or stop what uses this one") from None
    return 0


@hookimpl
def anet_cli_commands() -> list[CliCommand]:
    return [
        CliCommand("hub", "run a hub and administer it (serve, identity, approve, pending, "
                          "official, credit, ledger, doctor)",
                   configure=_configure_hub, run=_run_hub, module="hub",
                   description="A hub relays sealed envelopes between nodes, keeps the directory "
                               "and stores envelopes for offline nodes; it is a payment rail "
                               "too. See docs/hub.md and docs/payments.md."),
    ]


def _identity(args: argparse.Namespace, ctx: CliContext, data: Path) -> int:
    """The operator key ``anet hub serve`` would use (made as its first start would make it),
    so that two operators can name each other's hub before either starts with --federate."""
    from anet_core.api import Identity, private_dir

    private_dir(data)
    identity, created = Identity.load_or_create(data / "identity")
    if args.json:
        ctx.print_json({"aid": identity.aid, "created": created})
    else:
        print(identity.aid)
    return 0


def _doctor(args: argparse.Namespace, ctx: CliContext, data: Path) -> int:
    import asyncio

    from anet_hub.probes import doctor

    found = asyncio.run(doctor(data, args.url))
    if args.json:
        ctx.print_json([item.as_dict() for item in found])
    else:
        for item in found:
            print(f"  {'ok' if item.ok else 'DOWN':4}  {item.name:8}  {item.detail}")
        down = [item.name for item in found if not item.ok]
        print(f"Down: {', '.join(down)}." if down else "Every dependency answers.")
    return 0 if all(item.ok for item in found) else 1
