"""``anet modules``: which modules are compiled in (installed), and which are not."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from anet_core import hookimpl
from anet_core.records import CliCommand

if TYPE_CHECKING:
    from anet_core.cli.context import CliContext


def _run(args: argparse.Namespace, ctx: CliContext) -> int:
    report = ctx.plugins.report()
    if args.json:
        ctx.print_json(report)
        return 0
    for info in report["installed"]:
        print(f"installed      {info['name']:<10} {info['distribution']} {info['version']}")
    for info in report["notInstalled"]:
        print(f"not installed  {info['name']:<10} {info['install']}")
    for info in report["failed"]:
        print(f"failed         {info['name']:<10} {info['distribution']}: {info['error']}")
    for name in report["disabled"]:
        print(f"disabled       {name:<10} by ANET_DISABLE_MODULES")
    return 0


@hookimpl
def anet_cli_commands() -> list[CliCommand]:
    def configure(parser: argparse.ArgumentParser) -> None:
        parser.add_argument("--json", action="store_true", help="print JSON")

    return [CliCommand("modules", "list installed modules and the ones not installed",
                       configure=configure, run=_run, module="core")]
