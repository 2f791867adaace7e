"""The ``anet`` command line."""
