"""The module a2a: every remote agent of the network as an A2A 1.0 server on loopback."""

from anet_a2a.plugin import anet_cli_commands, anet_config_blocks, anet_doctor_checks, anet_lifespan

__all__ = ["anet_cli_commands", "anet_config_blocks", "anet_doctor_checks", "anet_lifespan"]
