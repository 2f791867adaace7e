"""Files the daemon writes: atomically, and private when they hold a secret."""

from __future__ import annotations

import os
import stat
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes, *, mode: int = 0o644, locked: bool = False) -> None:
    """Write ``data`` to ``path`` so that a reader sees the old file or the new one, never a part.

    The temporary file is created with ``mode`` already set, so a secret is never readable by
    others, not even for an instant. ``locked``: the caller holds a lock that keeps every
    other writer of ``path`` out, so the temporary file can have a fixed name (no directory
    already there to create, no random name to find: what a writer on the hot path saves).
    """
    if locked:
        tmp = str(path.with_name(f".{path.name}.tmp"))
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    else:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    _fsync_dir(path.parent)


def write_private(path: Path, data: bytes | str) -> None:
    """Write a secret: atomically, mode 0600."""
    if isinstance(data, str):
        data = data.encode()
    write_atomic(path, data, mode=0o600)


def private_dir(path: Path) -> int | None:
    """Make ``path`` a directory only its owner can enter (mode 0700), creating it if needed.

    A directory that existed with a wider mode (0755 from a ``mkdir`` before ``anet init``) is
    tightened: what it holds (a database of task contents, logs, configuration) is nobody
    else's to read. Returns the mode it had when it was tightened, else None.
    """
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    mode = stat.S_IMODE(path.stat().st_mode)
    if mode & 0o077:
        os.chmod(path, 0o700)
        return mode
    return None


def _fsync_dir(directory: Path) -> None:
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
