"""The module backends: accepted tasks served by local A2A servers."""

from anet_backends.plugin import anet_config_blocks, anet_doctor_checks

__all__ = ["anet_config_blocks", "anet_doctor_checks"]
