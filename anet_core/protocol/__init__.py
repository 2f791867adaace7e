"""What a node and a hub both speak, defined in docs/protocol.md: ``envelope`` (sealed and
signed end to end), ``frames`` (the WebSocket protocol between a node and its hub),
``documents`` (signed cards, receipts, reviews and the official list) and ``tasks`` (the task
messages nodes send each other, and the ``anet.*`` metadata keys) and ``payments`` (prices,
payment authorizations and settlements at a hub rail, docs/payments.md). Modules may import it."""
