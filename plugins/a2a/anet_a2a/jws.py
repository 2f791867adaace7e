"""JWS signatures of agent cards (A2A §8.4): RFC 8785 (JCS) canonical form, EdDSA, detached.

The signed payload is the card without ``signatures``, with empty strings, lists and objects
removed (what the SDK's verifier canonicalises), in JCS form. The signature object carries the
protected header (``alg``, ``typ``, ``kid`` and the public key as a JWK) and the signature; the
payload is not repeated, a verifier canonicalises the card it received.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from anet_core.api import Identity, b64u, unb64u, verify_ed25519
from anet_core.wire import AgentCardSignature

MAX_DEPTH = 128


def _clean_empty(value: Any) -> Any:
    if isinstance(value, dict):
        cleaned = {key: item for key, raw in value.items()
                   if (item := _clean_empty(raw)) is not None}
        return cleaned or None
    if isinstance(value, list):
        items = [item for raw in value if (item := _clean_empty(raw)) is not None]
        return items or None
    if isinstance(value, str) and not value:
        return None
    return value


def _number(value: float) -> str:
    # ECMAScript Number::toString, which RFC 8785 §3.2.2.3 prescribes; repr() is the shortest
    # round-trip form too, it only spells exponents and whole numbers differently.
    if not math.isfinite(value):
        raise ValueError(f"{value} has no JSON form")
    if value == 0:
        return "0"
    if value.is_integer() and abs(value) < 1e21:
        return str(int(value))
    text = repr(value)
    if "e" not in text:
        return text
    mantissa, _, exponent = text.partition("e")
    power = int(exponent)
    if -7 < power < 21:
        return format(value, "f").rstrip("0").rstrip(".")
    return f"{mantissa.removesuffix('.0')}e{'+' if power > 0 else '-'}{abs(power)}"


def _write(value: Any, out: list[str], depth: int) -> None:
    if depth > MAX_DEPTH:
        raise ValueError(f"nesting deeper than {MAX_DEPTH} has no canonical form here")
    if isinstance(value, dict):
        out.append("{")
        items = sorted(value.items(), key=lambda item: item[0].encode("utf-16-be"))
        for index, (key, item) in enumerate(items):
            out.append("," if index else "")
            out.append(json.dumps(key, ensure_ascii=False))
            out.append(":")
            _write(item, out, depth + 1)
        out.append("}")
    elif isinstance(value, list | tuple):
        out.append("[")
        for index, item in enumerate(value):
            out.append("," if index else "")
            _write(item, out, depth + 1)
        out.append("]")
    elif isinstance(value, float):
        out.append(_number(value))
    else:
        # Strings: json.dumps escapes exactly '"', '\\' and C0 controls when ensure_ascii=False,
        # with the short forms (\n, \t, ...) that RFC 8785 §3.2.2.2 asks for.
        out.append(json.dumps(value, ensure_ascii=False))


def canonical_card(card: dict[str, Any]) -> bytes:
    """The bytes a card signature covers: JCS of the card without signatures and empty values."""
    body = {key: value for key, value in card.items() if key != "signatures"}
    out: list[str] = []
    _write(_clean_empty(body) or {}, out, 1)
    return "".join(out).encode()


def key_id(identity: Identity) -> str:
    """``kid`` of the node's current signing key: the AID and the key's seq in its history."""
    return f"anet:{identity.aid}#key-{identity.key_seq}"


def sign_card(card: dict[str, Any], identity: Identity) -> AgentCardSignature:
    """A detached JWS of ``card`` (ProtoJSON) by the node's current signing key."""
    header = {"alg": "EdDSA", "typ": "JOSE", "kid": key_id(identity),
              "jwk": {"kty": "OKP", "crv": "Ed25519", "x": identity.signing_public_key}}
    protected = b64u(json.dumps(header, separators=(",", ":")).encode())
    signing_input = f"{protected}.{b64u(canonical_card(card))}".encode()
    return AgentCardSignature(protected=protected,
                              signature=b64u(identity.signer().sign_jws(signing_input)))


class SignatureState(StrEnum):
    """What the signatures of a card show (``verify_card``)."""

    VALID = "valid"
    """An EdDSA signature by the key in its own protected header covers the card: the card is
    intact as its signer wrote it (who the signer is, the key alone does not say)."""
    INVALID = "invalid"
    ABSENT = "absent"
    UNSUPPORTED = "unsupported"
    """Signed with an algorithm or key this node does not check (only EdDSA with a JWK)."""


@dataclass(frozen=True)
class CardSignatureCheck:
    state: SignatureState
    kid: str = ""


def _protected_header(signature: Any) -> dict[str, Any] | None:
    try:
        header = json.loads(unb64u(signature["protected"]))
    except (KeyError, TypeError, ValueError):
        return None
    return header if isinstance(header, dict) else None


def verify_card(card: dict[str, Any]) -> CardSignatureCheck:
    """Check the first signature of ``card`` that this node can check."""
    signatures = card.get("signatures")
    if not isinstance(signatures, list) or not signatures:
        return CardSignatureCheck(SignatureState.ABSENT)
    payload = b64u(canonical_card(card))
    for signature in signatures:
        header = _protected_header(signature)
        if header is None:
            return CardSignatureCheck(SignatureState.INVALID)
        jwk = header.get("jwk")
        if header.get("alg") != "EdDSA" or not isinstance(jwk, dict) \
                or jwk.get("kty") != "OKP" or jwk.get("crv") != "Ed25519":
            continue
        kid = str(header.get("kid", ""))[:200]
        try:
            valid = verify_ed25519(unb64u(jwk["x"]), unb64u(signature["signature"]),
                                   f"{signature['protected']}.{payload}".encode())
        except (KeyError, TypeError, ValueError):
            valid = False
        return CardSignatureCheck(SignatureState.VALID if valid else SignatureState.INVALID, kid)
    return CardSignatureCheck(SignatureState.UNSUPPORTED)
