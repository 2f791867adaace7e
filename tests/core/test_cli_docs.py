"""docs/cli.md documents every command and subcommand of the real parser, with every option.

The parser is built exactly as ``anet`` builds it, from the ``anet_cli_commands`` hooks of the
built-ins and of every installed module, so a command a module adds without a section in
docs/cli.md fails here. Each command has a heading ``### `anet <command>` `` and each of its
options (``--flag``) appears in the text of its section. Likewise docs/configuration.md has a
section for the core's sections and every installed module's block, naming each of their keys.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from anet_core.cli.context import CliContext
from anet_core.cli.main import _commands, build_parser
from anet_core.plugins import make_plugins
from anet_core.settings import Settings

CLI_MD = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
HEADING = re.compile(r"^(#{2,4}) `anet ([a-z0-9 -]+?)`\s*$", re.MULTILINE)


def walk(parser: argparse.ArgumentParser,
         path: tuple[str, ...] = ()) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    """Every (command path, parser) below ``parser``; aliases once."""
    yield " ".join(path), parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            seen: set[int] = set()
            for name, child in action.choices.items():
                if id(child) not in seen:
                    seen.add(id(child))
                    yield from walk(child, (*path, name))


def own_actions(parser: argparse.ArgumentParser) -> list[argparse.Action]:
    return [action for action in parser._actions
            if not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction))]


def is_group_only(parser: argparse.ArgumentParser) -> bool:
    """A word that only groups subcommands (``anet keys``, ``anet hub``): its children are the
    documented commands."""
    return not own_actions(parser) and any(
        isinstance(action, argparse._SubParsersAction) for action in parser._actions)


def commands() -> dict[str, argparse.ArgumentParser]:
    ctx = CliContext(settings=Settings(), plugins=make_plugins())
    parser = build_parser(_commands(ctx))
    return {path: child for path, child in walk(parser)
            if path and not is_group_only(child)}


def sections() -> dict[str, str]:
    """The text of each ``anet <command>`` section of docs/cli.md, up to the next heading."""
    text = CLI_MD.read_text(encoding="utf-8")
    matches = list(HEADING.finditer(text))
    found: dict[str, str] = {}
    for index, match in enumerate(matches):
        end = matches[index + 1].start() if index + 1 < len(matches) else len(text)
        found[match.group(2)] = text[match.end():end]
    return found


COMMANDS = commands()


def test_the_parser_has_the_commands_of_every_module() -> None:
    assert {"init", "up", "demo", "hub serve", "send", "trust"} <= set(COMMANDS)


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_command_is_documented(path: str) -> None:
    documented = sections()
    assert path in documented, f"docs/cli.md has no heading ### `anet {path}`"
    section = documented[path]
    for action in own_actions(COMMANDS[path]):
        for option in action.option_strings:
            if option.startswith("--"):
                assert option in section, f"docs/cli.md: `anet {path}` does not mention {option}"


def test_no_section_for_a_command_that_does_not_exist() -> None:
    groups = {" ".join(path.split()[:depth]) for path in COMMANDS
              for depth in range(1, len(path.split()))}
    stale = set(sections()) - set(COMMANDS) - groups
    assert not stale, f"docs/cli.md documents commands that do not exist: {sorted(stale)}"


# --- docs/configuration.md -----------------------------------------------------------------------

CONFIGURATION_MD = CLI_MD.parent / "configuration.md"
CONFIG_HEADING = re.compile(r"^### `([a-z0-9_.]+)`\s*$", re.MULTILINE)


def config_sections() -> dict[str, str]:
    text = CONFIGURATION_MD.read_text(encoding="utf-8")
    matches = list(CONFIG_HEADING.finditer(text))
    return {match.group(1): text[match.end():(matches[index + 1].start()
                                              if index + 1 < len(matches) else len(text))]
            for index, match in enumerate(matches)}


def config_keys(model: type, prefix: str = "") -> Iterator[str]:
    """Every key a config model accepts, nested ones as ``retry.max_interval``, lists as
    ``backends[].match``."""
    from pydantic import BaseModel

    for name, info in model.model_fields.items():
        key = f"{prefix}{info.alias or name}"
        yield key
        annotation = info.annotation
        inner = getattr(annotation, "__args__", (annotation,))
        for candidate in inner:
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                list_like = getattr(annotation, "__origin__", None) is list
                yield from config_keys(candidate, f"{key}[]." if list_like else f"{key}.")


def config_blocks() -> dict[str, type]:
    from anet_core.config import HubSection, NodeSection

    blocks = {block.module: block.model
              for block in make_plugins().collect("anet_config_blocks")}
    return {"node": NodeSection, "hub": HubSection} | {
        f"modules.{module}": model for module, model in blocks.items()}


@pytest.mark.parametrize("section", sorted(config_blocks()))
def test_every_config_key_is_documented(section: str) -> None:
    documented = config_sections()
    assert section in documented, f"docs/configuration.md has no heading ### `{section}`"
    for key in config_keys(config_blocks()[section]):
        leaf = key.rsplit(".", 1)[-1]
        assert re.search(rf"\b{re.escape(leaf)}\b", documented[section]), \
            f"docs/configuration.md: {section} does not document {key}"
