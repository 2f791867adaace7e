"""The one paging cursor codec (anet_core.util.canonical), used by the task list and the hub."""

from __future__ import annotations

import pytest

from anet_core.util.canonical import b64u, decode_cursor, encode_cursor


def test_a_cursor_round_trips_and_is_url_safe():
    position = {"ts": 1712.5, "id": "t-1/é"}
    cursor = encode_cursor(position)
    assert decode_cursor(cursor) == position
    assert set(cursor) <= set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")
    assert encode_cursor({"id": "x", "ts": 1}) == encode_cursor({"ts": 1, "id": "x"})


@pytest.mark.parametrize("text", ["not a cursor!", "", b64u(b"\xff\xfe"), b64u(b"[1, 2]"),
                                  b64u(b"42"), "A"])
def test_anything_else_is_refused(text):
    with pytest.raises(ValueError, match="not a cursor"):
        decode_cursor(text)
