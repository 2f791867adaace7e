"""The strict JSON reader: what it refuses, and where it says the problem is."""

from __future__ import annotations

import pytest

from anet_core.util.strictjson import UnencodableText, parse_json


@pytest.mark.parametrize("text", ['{"a": NaN}', "[Infinity]", "-Infinity", "1e400",
                                  '"\\ud800"', '{"\\udfff": 1}', b'"\xed\xa0\x80"', b'"\xff"'])
def test_refused(text: str | bytes) -> None:
    with pytest.raises(ValueError):
        parse_json(text)


def test_the_refusal_names_where() -> None:
    with pytest.raises(UnencodableText) as caught:
        parse_json('{"params": {"message": {"parts": [{"text": "a"}, {"text": "\\ud83d"}]}}}')
    assert caught.value.where == "params.message.parts[1].text"
    assert "U+D83D" in str(caught.value)


def test_accepted() -> None:
    assert parse_json('{"smile": "\\ud83d\\ude00", "n": 1.5e300, "big": 123456789012345678901}'
                      ) == {"smile": "\U0001f600", "n": 1.5e300, "big": 123456789012345678901}
