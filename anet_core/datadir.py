"""A node's data directory made complete: what ``anet init``, ``anet up`` and the daemon share."""

from __future__ import annotations

from dataclasses import dataclass

from anet_core.config import initial_config, write_config
from anet_core.control.loopback import TokenFile
from anet_core.identity import Identity
from anet_core.settings import DataPaths
from anet_core.util.fsutil import private_dir


@dataclass(frozen=True)
class InitStep:
    what: str
    created: bool


def initialise(paths: DataPaths) -> list[InitStep]:
    """Create what is missing of a node; never replace a key, a token or a configuration."""
    steps = [InitStep(f"data directory {paths.root}", not paths.root.exists())]
    widened = private_dir(paths.root)
    if widened is not None:
        steps.append(InitStep(f"data directory {paths.root} made private (mode 700, was "
                              f"{widened:o})", True))
    _, created = Identity.load_or_create(paths.identity)
    steps.append(InitStep(f"identity keys in {paths.identity}", created))
    token = TokenFile(paths.control_token)
    steps.append(InitStep(f"control token {paths.control_token}", not token.current()))
    token.ensure()
    steps.append(InitStep(f"configuration {paths.config}", not paths.config.exists()))
    if not paths.config.exists():
        write_config(paths.config, initial_config())
    return steps
