"""``anet demo``: a whole network on this machine, one task through it, and how to try more.

A built-in plugin (see DEFAULT_PLUGINS). The command starts a hub, the node "alice" (the
requester) and the node "bob" (the provider, whose backend is the example text agent) on loopback
in a temporary directory, sends a task from alice's local A2A endpoint to bob and back, and then
keeps the network up for the user's own commands until Ctrl-C (or exits at once with --once).
"""

from __future__ import annotations

import argparse

from anet_core import hookimpl
from anet_core.records import CliCommand

DEFAULT_TEXT = (
    "summarize 2: anet runs one node per user. Every remote agent appears on your machine as an "
    "ordinary A2A server on loopback, so any A2A client reaches the network without new code. "
    "Hubs relay envelopes that are sealed end to end, so a hub never sees what agents say. "
    "A node can hand the tasks it accepts to a local A2A server, which then serves the network.")


DESCRIPTION = """\
Start a hub, the node alice (requester) and the node bob (provider, served by
the example text agent examples/text_agent) on loopback in a temporary
directory; send a task from alice's local A2A endpoint through the hub to bob
and back; print commands to try; keep running until Ctrl-C. Nothing outside
the temporary directory is touched, and everything is stopped and removed on
exit. The example agent comes with the source checkout (run it there)."""


def _configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--once", action="store_true",
                        help="do one round trip, print the result and exit (for tests and CI)")
    parser.add_argument("--text", default=DEFAULT_TEXT,
                        help="the message alice sends to bob's text agent (default: a summary "
                             "request; try 'transform title: ...' or 'stats: ...')")
    parser.add_argument("--keep", action="store_true",
                        help="keep the temporary directory (data, logs) after exit")


def _run(args: argparse.Namespace, ctx: object) -> int:
    from anet_core.demo.command import run_demo

    return run_demo(args, ctx)


@hookimpl
def anet_cli_commands() -> list[CliCommand]:
    return [CliCommand(
        "demo", "run a hub, two nodes and an example agent on this machine and send a task",
        configure=_configure, run=_run,
        description=DESCRIPTION, module="core")]
