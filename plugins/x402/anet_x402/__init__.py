"""The module x402: payments for priced skills per the a2a-x402 extension."""

from anet_x402.plugin import anet_config_blocks, anet_doctor_checks

__all__ = ["anet_config_blocks", "anet_doctor_checks"]
