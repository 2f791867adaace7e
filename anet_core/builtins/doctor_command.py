"""``anet doctor``: the presentation of the doctor's results."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from anet_core import hookimpl
from anet_core.errors import AnetError
from anet_core.plugins import Plugins, install_command
from anet_core.records import CheckStatus, CliCommand

if TYPE_CHECKING:
    from anet_core.cli.context import CliContext
    from anet_core.config import Config
    from anet_core.doctor import Outcome


def _run(args: argparse.Namespace, ctx: CliContext) -> int:
    import asyncio

    from anet_core.doctor import CheckContext, all_checks, run_checks, select

    checks = select(all_checks(ctx.plugins, _config_or_none(ctx)), args.names)
    if args.list:
        for check in checks:
            print(f"{check.name:<28} {check.module:<10} {check.summary}")
        return 0
    outcomes = asyncio.run(run_checks(checks, CheckContext(ctx.settings, ctx.plugins)))
    failed = bool(ctx.plugins.failures) or any(
        outcome.result.status is CheckStatus.FAIL for outcome in outcomes)
    if args.json:
        ctx.print_json({"ok": not failed, "modules": ctx.plugins.report(),
                        "checks": [outcome.as_dict() for outcome in outcomes]})
    else:
        _print(ctx.plugins, outcomes)
    return 1 if failed else 0


def _config_or_none(ctx: CliContext) -> Config | None:
    try:
        return ctx.config
    except AnetError:
        return None  # the check config-valid says why


def _print(plugins: Plugins, outcomes: list[Outcome]) -> None:
    installed = ", ".join(f"{info.name} ({info.distribution} {info.version})"
                          for info in plugins.modules.values())
    print(f"modules compiled in: {installed or 'none'}")
    for name in plugins.not_installed():
        print(f"module not compiled in: {name} (install with {install_command(name)})")
    for failure in plugins.failures.values():
        print(f"FAIL  module {failure.name} ({failure.distribution}) failed to load: "
              f"{failure.error}")
        print(f"      hint: reinstall {failure.distribution}, or uninstall it to run without "
              f"the module")
    for outcome in outcomes:
        result = outcome.result
        print(f"{result.status.value.upper():<5} {outcome.check.name:<26} {result.summary}")
        if result.detail:
            print("\n".join(f"      {line}" for line in result.detail.splitlines()))
        if result.hint and result.status is not CheckStatus.OK:
            print(f"      hint: {result.hint}")


@hookimpl
def anet_cli_commands() -> list[CliCommand]:
    def configure(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("names", nargs="*", metavar="NAME",
                            help="run only these checks, or the checks of these modules")
        parser.add_argument("--json", action="store_true", help="print JSON")
        parser.add_argument("--list", action="store_true", help="list the checks, run none")

    return [CliCommand("doctor", "check the node's health and say how to fix each problem",
                       configure=configure, run=_run,
                       description="Run every module's health checks concurrently. Exits 1 "
                                   "when a check fails or a module failed to load.", module="core")]
