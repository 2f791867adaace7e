"""Envelopes whose sealed payload the strict JSON reader refuses."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anet_core.identity import Identity
from anet_core.protocol import envelope as envelope_module
from anet_core.protocol.envelope import EnvelopeError, open_envelope, seal


def test_an_envelope_with_a_lone_surrogate_is_malformed(tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    """A sender whose JSON writer escapes a lone surrogate (so it can sign and seal it): the
    receiver refuses the payload instead of failing on it."""
    alice = Identity.create(tmp_path / "alice")
    bob = Identity.create(tmp_path / "bob")
    monkeypatch.setattr(envelope_module, "canonical_json", lambda value: json.dumps(
        value, sort_keys=True, separators=(",", ":")).encode())
    sealed = seal(alice, bob.aid, bob.encryption_public_key, {"text": "\ud800"})
    monkeypatch.undo()
    with pytest.raises(EnvelopeError) as caught:
        open_envelope(sealed, bob, alice.verified_history)
    assert caught.value.reason == "malformed"
