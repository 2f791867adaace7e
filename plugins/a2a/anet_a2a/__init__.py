"""The module a2a: every remote agent of the network as an A2A 1.0 server on loopback (hooks in
``plugin``)."""
