"""Process settings from the environment, and the layout of the data directory."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pydantic import Field, field_validator
from pydantic_settings import BaseSettings, SettingsConfigDict


class Settings(BaseSettings):
    """Settings read from ``ANET_*`` environment variables (documented in docs/configuration.md)."""

    model_config = SettingsConfigDict(env_prefix="ANET_", extra="ignore")

    data_dir: Path = Field(default=Path("~/.anet"), description="The node's data directory")
    log_level: str = Field(default="INFO", description="DEBUG, INFO, WARNING or ERROR")
    disable_modules: str = Field(
        default="", description="Comma-separated module names not to load, e.g. \"a2a,x402\"")
    trace_hooks: bool = Field(default=False, description="Log every hook call (for module authors)")

    @field_validator("data_dir")
    @classmethod
    def _expand(cls, value: Path) -> Path:
        return value.expanduser().absolute()

    @field_validator("log_level")
    @classmethod
    def _level(cls, value: str) -> str:
        level = value.upper()
        if level not in {"DEBUG", "INFO", "WARNING", "ERROR"}:
            raise ValueError(f"ANET_LOG_LEVEL={value!r}: use DEBUG, INFO, WARNING or ERROR")
        return level

    @property
    def disabled(self) -> frozenset[str]:
        return frozenset(name.strip() for name in self.disable_modules.split(",") if name.strip())

    @property
    def paths(self) -> DataPaths:
        return DataPaths(self.data_dir)


@dataclass(frozen=True)
class DataPaths:
    """Where everything lives inside the data directory (docs/configuration.md, "The data
    directory")."""

    root: Path

    @property
    def config(self) -> Path:
        return self.root / "config.json"

    @property
    def identity(self) -> Path:
        return self.root / "identity"

    @property
    def control_addr(self) -> Path:
        return self.root / "control_addr.txt"

    @property
    def control_token(self) -> Path:
        return self.root / "control_token.txt"

    @property
    def database(self) -> Path:
        return self.root / "anet.db"

    @property
    def evidence_chain(self) -> Path:
        """The evidence chain (``anet_core.evidence``); its signed head lies beside it."""
        return self.root / "evidence" / "chain.jsonl"

    @property
    def hub_pin(self) -> Path:
        """The home hub's AID and key history as first seen at ``hub.url``."""
        return self.root / "hub-pin.json"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def log_file(self) -> Path:
        return self.logs / "anetd.log"

    @property
    def pid_file(self) -> Path:
        return self.logs / "anetd.pid"

    def module_dir(self, module: str) -> Path:
        return self.root / "modules" / module
