"""The node's side of its home hub: ``anet join``, the ``/hub/`` control routes
(anet_core.builtins.join_routes, loaded by the daemon only), and the doctor checks of the link
(``hub-connection``) and of the card it publishes (``card-charge``)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from anet_core import hookimpl
from anet_core.daemon import running_pid
from anet_core.errors import AnetError
from anet_core.records import CheckResult, CheckStatus, CliCommand, ControlRoutes, DoctorCheck

if TYPE_CHECKING:
    from anet_core.cli.context import CliContext
    from anet_core.doctor import CheckContext
    from anet_core.node import Node

# -- anet join ------------------------------------------------------------------------------------


def _run_join(args: argparse.Namespace, ctx: CliContext) -> int:
    from anet_core.config import read_raw, write_config
    from anet_core.link.connection import normalize_hub_url

    try:
        url, *instances = dict.fromkeys(normalize_hub_url(each) for each in args.urls)
    except ValueError as error:
        raise AnetError("hub-bad-url", str(error)) from None
    raw = read_raw(ctx.paths.config)
    hub = raw.setdefault("hub", {})
    hub["url"] = url
    if instances:
        hub["instances"] = instances
    else:
        hub.pop("instances", None)
    write_config(ctx.paths.config, raw)
    # Joining is the operator's explicit trust decision: the hub met next is pinned afresh.
    ctx.paths.hub_pin.unlink(missing_ok=True)
    also = f", and its other instances {', '.join(instances)}," if instances else ""
    print(f"Recorded {url}{also} as this node's home hub in {ctx.paths.config}.")
    if running_pid(ctx.paths) is None:
        print("Start the node with `anet up`; it registers at the hub then.")
        return 0
    status = ctx.daemon.post("/hub/join", {"url": url, "instances": instances})
    print(status["sentence"])
    return 0


@hookimpl
def anet_cli_commands() -> list[CliCommand]:
    return [
        CliCommand("join", "make a hub this node's home hub and register there",
                   configure=lambda parser: parser.add_argument(
                       "urls", nargs="+", metavar="url",
                       help="the hub's URL, e.g. ws://hub.example.org:8765; then the URLs of "
                            "its other instances, which the node fails over to"),
                   run=_run_join, module="core"),
    ]


# -- control routes -------------------------------------------------------------------------------


@hookimpl
def anet_routes(node: Node) -> list[ControlRoutes]:
    from anet_core.builtins.join_routes import routes  # the daemon's side, loaded there

    return [ControlRoutes(module="hub", routes=list(routes))]


# -- doctor ---------------------------------------------------------------------------------------


async def hub_connection(ctx: CheckContext) -> CheckResult:
    status = await ctx.daemon_status()
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


async def card_charge(ctx: CheckContext) -> CheckResult:
    """A price for some skills and a backend for every task, with no price for every task: a
    client that names no skill (most A2A clients name none) is served for free what the prices
    charge for (docs/payments.md, "Charging for skills")."""
    from anet_core.protocol.tasks import ANY_SKILL

    status = await ctx.daemon_status()
    if status is None:
        return CheckResult(CheckStatus.SKIP, "the daemon is not running",
                           hint="start it with `anet up`")
    card = status["card"]
    prices: dict[str, str] = card["prices"]
    if not prices:
        return CheckResult(CheckStatus.OK, "no skill is priced")
    if ANY_SKILL in prices:
        return CheckResult(CheckStatus.OK, 'every task is priced ("*" too)')
    if not card["catchAll"]:
        return CheckResult(CheckStatus.OK, f"priced: {', '.join(sorted(prices))}; no backend "
                                           "serves every task")
    serving = " and ".join(card["catchAll"])
    charging = " and ".join(sorted(set(prices.values())))
    return CheckResult(
        CheckStatus.WARN, f"a task that names no skill is served for free, by the backend for "
                          f"\"*\" (module {serving})",
        detail=f"module {charging} prices {', '.join(sorted(prices))} and not \"*\": a client "
               "that names no skill gets no price, and that backend serves it",
        hint=f'give "*" a price too (module {charging}: every task no other price names), or '
             'give each skill a backend of its own instead of "*"')


@hookimpl
def anet_doctor_checks() -> list[DoctorCheck]:
    return [DoctorCheck("hub-connection", "core", "the node is registered at its home hub",
                        hub_connection),
            DoctorCheck("card-charge", "core", "no backend serves for free the tasks a price "
                        "is meant for", card_charge)]
