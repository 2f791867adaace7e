"""Handing back to the system the memory that start-up used and freed.

Start-up (reading the configuration, building the models, opening the stores, the first
exchange with the hub) frees much of what it allocated, but glibc keeps freed heap memory in
the process for later allocations; ``malloc_trim(0)`` returns the free pages (0.5 MiB of an idle
node, docs/performance.md "Idle memory"). A ``gc.collect()`` before it freed nothing more that
could be measured, so there is none. Elsewhere than on glibc this does nothing.
"""

from __future__ import annotations

import ctypes


def release_startup_memory() -> None:
    """Return free heap pages to the system (once start-up is done)."""
    try:
        malloc_trim = ctypes.CDLL(None).malloc_trim  # the C library the interpreter runs on
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to return this way
        return
    malloc_trim(0)
