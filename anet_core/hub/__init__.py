"""The hub: a relay of sealed envelopes and a directory of signed cards (``anet hub serve``),
and the node's link to its home hub (``anet_core.hub.client``).

Modules: ``frames`` (the WebSocket protocol), ``documents`` (cards, receipts, reviews, the
official list), ``storage`` (the one storage interface) and ``sqlite`` (its embedded
implementation), ``directory``, ``relay``, ``session`` and ``server`` (the hub), ``admin``
(operator commands), ``client`` and ``peers`` (the node side), ``plugin`` (CLI, control routes,
doctor check). See docs/hub.md and docs/protocol.md.
"""
