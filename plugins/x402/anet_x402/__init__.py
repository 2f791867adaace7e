"""The module x402: payments for priced skills per the a2a-x402 extension (hooks in ``plugin``)."""
