"""The tools ``anet mcp`` serves to MCP hosts (``anet_mcp_tools``): the tool, what its handler
works with during one call, and what it answers.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pydantic import BaseModel

    from anet_core.control.client import AsyncControlClient


@dataclass(frozen=True)
class McpResult:
    """What an MCP tool answers: a short ``text`` for the model to read and the same facts as
    ``data`` (a JSON object), the tool result's structured content."""

    text: str
    data: dict[str, Any]


@dataclass(frozen=True)
class McpCall:
    """What a tool's handler works with during one call of ``anet mcp``.

    ``control`` calls the running daemon's control plane (an :class:`AsyncControlClient`; a
    daemon that is not running is an AnetError naming the data directory and ``anet up``).
    ``progress(message)`` sends an MCP progress notification to the host when it asked for
    them, and does nothing otherwise.
    """

    control: AsyncControlClient
    progress: Callable[[str], Awaitable[None]]


_TOOL_NAME = re.compile(r"^[a-z][a-z0-9_]{0,63}$")


@dataclass(frozen=True)
class McpTool:
    """A tool ``anet mcp`` serves to MCP hosts (``anet_mcp_tools``).

    ``arguments`` is a pydantic model (``extra="forbid"``): its JSON schema is the tool's
    input schema, and a call's arguments are validated with it before ``run(arguments, call)``
    is awaited, so a wrong or unknown argument never reaches the handler. ``description`` is
    one line a language model can act on. The hints are the MCP tool annotations, with the
    spec's defaults: a host asks before a tool that is not ``read_only``. ``run`` raises
    :class:`AnetError` for what the user can fix; the host sees it as a tool error with the
    message and the hint.
    """

    name: str
    description: str
    arguments: type[BaseModel]
    run: Callable[[Any, McpCall], Awaitable[McpResult]]
    title: str = ""
    read_only: bool = False
    """readOnlyHint: the tool changes nothing."""
    destructive: bool = True
    """destructiveHint (when not read-only): it may undo or end something."""
    idempotent: bool = False
    """idempotentHint: calling it again with the same arguments changes nothing more."""
    open_world: bool = True
    """openWorldHint: it reaches other parties (the hub, other agents)."""
    module: str = field(kw_only=True)

    def __post_init__(self) -> None:
        if not _TOOL_NAME.match(self.name):
            raise ValueError(f"MCP tool names are snake_case (a-z, 0-9, _), got {self.name!r}")
        if "\n" in self.description.strip():
            raise ValueError(f"the description of the MCP tool {self.name} is one line")

