"""``anet``: parse the command line, run the command, present errors in one place."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence
from typing import Any

from anet_core.cli.context import CliContext
from anet_core.errors import AnetError
from anet_core.plugins import make_plugins
from anet_core.records import CliCommand
from anet_core.settings import Settings

DESCRIPTION = """\
anet runs your node of the agent network. Remote agents appear on this machine as ordinary
A2A servers on loopback; tasks sent to you can be served by a local A2A server.

First steps:  anet init   (create the node)   anet up   (start it)   anet status
"""


def build_parser(commands: Sequence[CliCommand],
                 argv: Sequence[str] | None = None) -> argparse.ArgumentParser:
    """The parser of ``anet``. A command named with several words ("agents wire") nests below
    the command of its first words, so two modules can share a command group.

    Given ``argv``, only the commands it names get their arguments (``configure``): argparse
    reads no other subparser, and the code of the commands that do not run stays unloaded."""
    parser = argparse.ArgumentParser(
        prog="anet", description=DESCRIPTION, formatter_class=argparse.RawDescriptionHelpFormatter)
    parsers: dict[tuple[str, ...], argparse.ArgumentParser] = {(): parser}
    groups: dict[tuple[str, ...], argparse._SubParsersAction] = {}
    children: dict[tuple[str, ...], set[str]] = {}  # a group's commands and groups, by its path
    for command in commands:
        words = tuple(command.name.split())
        for depth in range(len(words)):
            children.setdefault(words[:depth], set()).add(words[depth])

    def parser_for(path: tuple[str, ...], command: CliCommand | None) -> argparse.ArgumentParser:
        if path in parsers:
            return parsers[path]
        parent = parser_for(path[:-1], None)
        if path[:-1] not in groups:
            groups[path[:-1]] = parent.add_subparsers(
                dest=f"_command_{len(path)}", metavar="COMMAND", title="commands")
        group_help = "commands: " + ", ".join(sorted(children.get(path, ())))
        child = groups[path[:-1]].add_parser(
            path[-1], help=command.help if command else group_help,
            aliases=list(command.aliases) if command else [],
            description=(command.description or command.help) if command else None,
            formatter_class=argparse.RawDescriptionHelpFormatter)
        child.set_defaults(_command=command, _parser=child)
        parsers[path] = child
        return child

    named = None if argv is None else _named(commands, argv)
    for command in sorted(commands, key=lambda c: c.name.split()):
        child = parser_for(tuple(command.name.split()), command)
        if named is None or command in named:
            command.configure(child)
    return parser


def _named(commands: Sequence[CliCommand], argv: Sequence[str]) -> list[CliCommand]:
    """The commands whose words (or an alias in place of the last) lead ``argv``: the one that
    runs and the groups it is in."""
    by_words: dict[tuple[str, ...], CliCommand] = {}
    for command in commands:
        *group, last = command.name.split()
        for word in (last, *command.aliases):
            by_words[(*group, word)] = command
    known_prefixes = {words[:depth] for words in by_words for depth in range(1, len(words) + 1)}
    named, path = [], ()
    for word in argv:
        if (*path, word) not in known_prefixes:
            break
        path = (*path, word)
        if path in by_words:
            named.append(by_words[path])
            path = tuple(by_words[path].name.split())
    return named


def _commands(ctx: CliContext) -> list[CliCommand]:
    return ctx.plugins.collect("anet_cli_commands", unique=_invocations)


def _invocations(command: CliCommand) -> list[str]:
    """How a command is called: its name, and each alias in place of its last word."""
    *group, last = command.name.split()
    return [f"the command `anet {' '.join([*group, word])}`"
            for word in (last, *command.aliases)]


def main(argv: Sequence[str] | None = None) -> int:
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    as_json = False
    try:
        settings = Settings()
        ctx = CliContext(settings=settings, plugins=make_plugins(disabled=settings.disabled))
        argv = sys.argv[1:] if argv is None else argv
        parser = build_parser(_commands(ctx), argv)
        args = parser.parse_args(argv)
        as_json = getattr(args, "json", False) is True
        command: CliCommand | None = getattr(args, "_command", None)
        if command is None:
            getattr(args, "_parser", parser).print_help()
            return 2
        return command.run(args, ctx)
    except AnetError as error:
        if as_json:  # a script asked for JSON: the refusal is JSON too, on standard output
            CliContext.print_json(error.as_dict())
        else:
            print(error.render(), file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:
        return _reader_gone()
    except Exception as error:
        invalid = _validation_error(error)
        if invalid is None:
            raise
        first = invalid.errors()[0]
        print(f"error: {invalid.title}: {'.'.join(map(str, first['loc']))}: {first['msg']}",
              file=sys.stderr)
        return 1


def _validation_error(error: Exception) -> Any:
    """``error`` if it is pydantic's ValidationError, else None; named without importing
    pydantic, since a command that never loaded it cannot raise one."""
    core = sys.modules.get("pydantic_core")
    return error if core is not None and isinstance(error, core.ValidationError) else None


SIGPIPE_STATUS = 128 + 13
"""What a shell reports for a command a closed pipe stopped (``anet inbox | head``)."""


def _reader_gone() -> int:
    """The output's reader stopped early: end quietly. Python flushes stdout once more at
    exit; pointed at /dev/null that flush cannot fail and print a traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)
    return SIGPIPE_STATUS


if __name__ == "__main__":
    sys.exit(main())
