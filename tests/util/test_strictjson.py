"""The strict JSON reader: what it refuses, and where it says the problem is."""

from __future__ import annotations

import pytest

from anet_core.util.strictjson import UnencodableText, may_hold_surrogate, parse_json


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


@pytest.mark.parametrize("text", ['"\\uDBFF"', '["\\udc00x"]', '"a\\\\\\ud800"'])
def test_a_lone_surrogate_is_found_however_it_is_written(text: str) -> None:
    with pytest.raises(UnencodableText):
        parse_json(text)


def test_text_that_only_looks_like_an_escape_is_text() -> None:
    assert parse_json('{"path": "C:\\\\ud800"}') == {"path": "C:\\ud800"}


@pytest.mark.parametrize("depth", [63, 64, 65])
def test_nesting_is_counted_with_few_brackets_and_with_many(depth: int) -> None:
    nested = "[" * depth + "]" * depth
    padded = "[" + ",".join(["[]"] * 70 + [nested]) + "]"  # more brackets than MAX_DEPTH
    for text, levels in ((nested, depth), (padded, depth + 1)):
        if levels > 64:
            with pytest.raises(ValueError, match="nests deeper"):
                parse_json(text)
        else:
            assert parse_json(text) is not None


@pytest.mark.parametrize(("text", "may"), [('{"a": "b"}', False), ('{"a": "é😀"}', False),
                                           ('"\\ud83d\\ude00"', True), ('"\\uDC00"', True),
                                           ("\"\ud800\"", True), (b'"\xed\xa0\x80"', True),
                                           ('"x"'.encode("utf-16"), False),
                                           ('"\\ud800"'.encode("utf-16"), True)])
def test_may_hold_surrogate_is_false_only_for_text_that_cannot(text: str | bytes,
                                                               may: bool) -> None:
    assert may_hold_surrogate(text) is may
