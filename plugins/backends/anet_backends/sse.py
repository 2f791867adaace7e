"""Reading server-sent events with a bound on each event, as A2A streams send them."""

from __future__ import annotations

from collections.abc import AsyncIterator

import aiohttp

CHUNK_BYTES = 64 * 1024


class EventTooLarge(ValueError):
    pass


async def sse_events(content: aiohttp.StreamReader, *,
                     max_event_bytes: int) -> AsyncIterator[tuple[str, str]]:
    """Yield ``(event name, data)`` for each event; comments (keep-alive pings) are skipped.

    Lines may end in LF or CRLF; several ``data:`` lines of one event are joined with LF.
    Raises :class:`EventTooLarge` when one event grows past ``max_event_bytes``, so a backend
    cannot make the daemon buffer without limit.
    """
    buffer = b""
    name, data, size = "", [], 0
    async for chunk in content.iter_chunked(CHUNK_BYTES):
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for raw in lines:
            line = raw.rstrip(b"\r").decode("utf-8", errors="replace")
            if not line:
                if data:
                    yield name or "message", "\n".join(data)
                name, data, size = "", [], 0
                continue
            field, _, value = line.partition(":")
            value = value.removeprefix(" ")
            if field == "data":
                data.append(value)
                size += len(raw)
            elif field == "event":
                name = value
        if size + len(buffer) > max_event_bytes:
            raise EventTooLarge(f"an event of the stream is larger than {max_event_bytes} bytes")
    if data:
        yield name or "message", "\n".join(data)
