"""Leaf helpers that import nothing of anet: ``canonical`` (canonical JSON, base64url, cursors),
``durations``, ``fsutil`` (atomic and private writes, private directories), ``procnet`` (who
listens on a socket, from /proc), ``backoff`` (one jittered backoff and one token bucket),
``strictjson`` (the one reader of JSON that clients and peers send) and ``serverlog`` (the
server log of aiohttp listeners)."""
