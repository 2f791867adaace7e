"""Handing back to the system the memory that start-up used and freed.

Start-up (reading the configuration, building the models, opening the stores, the first
exchange with the hub) frees much of what it allocated, but glibc keeps freed heap memory in
the process for later allocations; ``malloc_trim(0)`` returns the free pages (0.6-0.8 MiB of an
idle node, docs/performance.md "Idle memory"). ``gc.collect()`` first, so that cycles start-up
left behind are freed before the trim. Elsewhere than on glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import gc


def release_startup_memory() -> None:
    """Collect garbage and return free heap pages to the system (once start-up is done)."""
    gc.collect()
    try:
        malloc_trim = ctypes.CDLL(None).malloc_trim  # the C library the interpreter runs on
    except (OSError, AttributeError):  # not glibc (musl, macOS): nothing to return this way
        return
    malloc_trim(0)
