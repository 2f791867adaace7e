"""What every command receives: settings, and the plugins, configuration and daemon on demand."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any

from anet_core.control.client import ControlClient
from anet_core.plugins import Plugins
from anet_core.settings import DataPaths, Settings

if TYPE_CHECKING:
    from anet_core.config import Config


@dataclass
class CliContext:
    settings: Settings
    plugins: Plugins

    @property
    def paths(self) -> DataPaths:
        return self.settings.paths

    @cached_property
    def config(self) -> Config:
        from anet_core.config import load_config  # pydantic: only commands that read config.json

        return load_config(self.paths.config, self.plugins)

    @cached_property
    def daemon(self) -> ControlClient:
        return ControlClient(self.paths)

    @staticmethod
    def print_json(value: Any) -> None:
        json.dump(value, sys.stdout, indent=2, sort_keys=True)
        sys.stdout.write("\n")
