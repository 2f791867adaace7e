"""Leaf helpers that import nothing of anet: ``canonical`` (canonical JSON, base64url, cursors),
``durations``, ``fsutil`` (atomic and private writes), ``procnet`` (who listens on a socket,
from /proc) and ``backoff`` (one jittered backoff and one token bucket)."""
