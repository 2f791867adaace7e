"""The hub (module ``hub``): a relay of sealed envelopes and a directory of signed cards.

``app`` builds the aiohttp application (``anet hub serve``); ``session`` runs one node's
WebSocket; ``relay`` routes and queues envelopes; ``directory`` answers lookups and keeps cards,
histories and reviews; ``storage`` is the one storage interface and ``sqlite`` its embedded
implementation; ``admin`` holds the operator's commands; ``defaults`` the limits ``anet hub
serve`` uses unless told; ``plugin`` registers them. The hub shares only the protocol
(``anet_core.protocol``) with nodes. See docs/hub.md.
"""
