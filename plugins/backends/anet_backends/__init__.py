"""The module backends: accepted tasks served by local A2A servers (hooks in ``plugin``)."""

MODULE = "backends"
