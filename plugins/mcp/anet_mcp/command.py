"""``anet mcp``: serve the node's tools over stdio, or print the block an MCP host needs."""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from pathlib import Path
from typing import Any

from anet_core.api import CliContext


def anet_command() -> list[str]:
    """How a host starts this ``anet``: the console script beside this Python (a venv's
    ``bin/anet``), else the one on PATH, else this Python running the CLI module."""
    beside = Path(sys.executable).parent / "anet"
    if beside.is_file():
        return [str(beside.absolute())]
    on_path = shutil.which("anet")
    if on_path:
        return [str(Path(on_path).absolute())]
    return [str(Path(sys.executable).absolute()), "-m", "anet_core.cli.main"]


def host_config(ctx: CliContext, name: str) -> dict[str, Any]:
    """The ``mcpServers`` block most MCP hosts read (Claude Desktop, Cursor, and others)."""
    command, *prefix = anet_command()
    return {"mcpServers": {name: {
        "command": command, "args": [*prefix, "mcp"],
        "env": {"ANET_DATA_DIR": str(ctx.paths.root.absolute())}}}}


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--print-config", action="store_true",
                        help="print the mcpServers JSON block for an MCP host and exit")
    parser.add_argument("--name", default="anet",
                        help="the server's name in that block (default %(default)s)")


def run(args: argparse.Namespace, ctx: CliContext) -> int:
    if args.print_config:
        json.dump(host_config(ctx, args.name), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    # The server and the MCP SDK load here, not with this module: `--help` and `--print-config`
    # need neither (about 0.8 s of imports).
    import asyncio

    from anet_mcp.server import collect_tools, serve_stdio

    module = ctx.plugins.modules.get("mcp")
    asyncio.run(serve_stdio(collect_tools(ctx.plugins), ctx.paths,
                            version=module.version if module else "0"))
    return 0
