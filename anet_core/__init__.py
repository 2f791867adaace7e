"""anet: a node daemon for an agent network."""

from __future__ import annotations

import pluggy

PROJECT = "anet"
"""The one name that feeds the hook markers, the plugin manager and the entry-point group."""

hookimpl = pluggy.HookimplMarker(PROJECT)

__all__ = ["PROJECT", "hookimpl"]
