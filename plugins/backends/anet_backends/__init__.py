"""The module backends: accepted tasks served by local A2A servers."""

from anet_backends.plugin import (
    anet_backend_kinds,
    anet_config_blocks,
    anet_doctor_checks,
    anet_lifespan,
    anet_policy_veto,
    anet_take_task,
)

__all__ = ["anet_backend_kinds", "anet_config_blocks", "anet_doctor_checks", "anet_lifespan",
           "anet_policy_veto", "anet_take_task"]
