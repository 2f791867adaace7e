"""The module a2a: every remote agent of the network as an A2A 1.0 server on loopback."""

from anet_a2a.plugin import anet_config_blocks, anet_doctor_checks

__all__ = ["anet_config_blocks", "anet_doctor_checks"]
