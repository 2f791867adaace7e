"""The strict base64url of protocol fields: exactly one text for each byte string."""

import base64

import pytest

from anet_core.identity.encoding import check_b64u, decode_b64u


@pytest.mark.parametrize("data", [b"", b"\x00", b"\xff\xfe", b"abc", bytes(range(256))])
def test_canonical_text_is_accepted_and_decodes_to_its_bytes(data: bytes) -> None:
    text = base64.urlsafe_b64encode(data).rstrip(b"=").decode()
    assert check_b64u(text, what="field") == len(data)
    assert decode_b64u(text, what="field", length=len(data)) == data


@pytest.mark.parametrize("text", ["ab+c", "ab/c", "abc=", "YQ==", "ab c", "abc\n", "abcé",
                                  "ab\ud800c", "a", "abcde", "YR", "YWJ"])
def test_anything_else_is_refused_naming_the_field(text: str) -> None:
    """Standard base64's characters, padding, white space, characters outside ASCII (a lone
    surrogate among them), a length no encoding has, and non-zero unused bits ("YR" and "YQ"
    are the same byte; only "YQ" is canonical)."""
    with pytest.raises(ValueError, match="field"):
        check_b64u(text, what="field")


def test_a_size_is_checked_before_the_text_is_read() -> None:
    with pytest.raises(ValueError, match="longer than 3 bytes"):
        check_b64u("A" * 10 + "\ud800", what="field", max_length=3)
    with pytest.raises(ValueError, match="must be 32 bytes, got 3"):
        check_b64u("YWJj", what="field", length=32)
