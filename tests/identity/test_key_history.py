"""Key histories: what verifies, and every way a history is refused."""

from __future__ import annotations

import base64
import copy
import hashlib
from dataclasses import dataclass

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from anet_core.identity import (
    AID_PATTERN,
    AID_REGEX,
    HistoryError,
    check_aid,
    is_aid,
    statement_hash,
    verify_history,
)
from anet_core.identity.history import MAX_HISTORY_LENGTH, KeyStatement, build_statement
from anet_core.identity.keys import EncryptionKey, SigningKey
from anet_core.identity.signatures import KEY_STATEMENT_CONTEXT, RAW_CONTEXT, sign_with_key
from anet_core.util.canonical import b64u, canonical_json


def public(key: SigningKey | EncryptionKey) -> bytes:
    return key.public


@dataclass
class Keys:
    signing: SigningKey
    encryption: EncryptionKey
    recovery: SigningKey

    @classmethod
    def new(cls, recovery: SigningKey | None = None) -> Keys:
        return cls(SigningKey.generate(), EncryptionKey.generate(),
                   recovery or SigningKey.generate())


def genesis(keys: Keys, *, signer: SigningKey | None = None,
            recovery_signer: SigningKey | None = None) -> KeyStatement:
    return build_statement(seq=0, kind="genesis", signing_key=public(keys.signing),
                           encryption_key=public(keys.encryption),
                           recovery_key=public(keys.recovery), prev=None, created=1_700_000_000,
                           signer=signer or keys.signing,
                           recovery_signer=recovery_signer or keys.recovery)


def successor(previous: KeyStatement, keys: Keys, kind: str, *,
              signer: SigningKey | None = None,
              recovery_signer: SigningKey | None = None) -> KeyStatement:
    return build_statement(seq=previous.seq + 1, kind=kind, signing_key=public(keys.signing),
                           encryption_key=public(keys.encryption),
                           recovery_key=public(keys.recovery), prev=previous.hash,
                           created=previous.created + 60, signer=signer,
                           recovery_signer=recovery_signer)


@dataclass
class Chain:
    keys: list[Keys]
    statements: list[KeyStatement]

    @property
    def wire(self) -> list[dict]:
        return [statement.to_dict() for statement in self.statements]


def make_chain(kinds: list[str]) -> Chain:
    """A valid history: genesis, then the given kinds of rotation."""
    keys = [Keys.new()]
    statements = [genesis(keys[0])]
    for kind in kinds:
        previous_keys = keys[-1]
        new_keys = Keys.new(None if kind == "emergency" else previous_keys.recovery)
        statements.append(successor(
            statements[-1], new_keys, kind,
            signer=previous_keys.signing if kind == "rotate" else None,
            recovery_signer=previous_keys.recovery if kind == "emergency" else None))
        keys.append(new_keys)
    return Chain(keys, statements)


def reason_of(statements: list, **kwargs: object) -> str:
    with pytest.raises(HistoryError) as caught:
        verify_history(statements, **kwargs)
    assert str(caught.value)  # every refusal carries a sentence for humans
    return caught.value.reason


# -- the AID -------------------------------------------------------------------------------------

def test_aid_is_derived_exactly_as_specified() -> None:
    chain = make_chain([])
    body = chain.statements[0].body()
    expected = base64.b32encode(hashlib.sha256(canonical_json(body)).digest()[:20]).decode().lower()
    history = verify_history(chain.wire)
    assert history.aid == expected
    assert len(history.aid) == 32 and is_aid(history.aid)


def test_aid_never_changes_through_rotations() -> None:
    chain = make_chain(["rotate", "emergency", "rotate"])
    assert verify_history(chain.wire).aid == verify_history(chain.wire[:1]).aid


@pytest.mark.parametrize("text", ["", "a" * 31, "a" * 33, "A" * 32, "a" * 31 + "1", "a" * 31 + "=",
                                  "a" * 32 + "\n", "a" * 31 + "-", None, 42])
def test_is_aid_refuses(text: object) -> None:
    assert not is_aid(text)
    with pytest.raises(ValueError, match="is not an AID"):
        check_aid(text)


def test_aid_regex_embeds_in_route_patterns() -> None:
    assert AID_PATTERN.match("abcdefghijklmnopqrstuvwxyz234567")
    assert f"{{aid:{AID_REGEX}}}" == "{aid:[a-z2-7]{32}}"


# -- valid histories -----------------------------------------------------------------------------

def test_valid_history_exposes_current_keys() -> None:
    chain = make_chain(["rotate", "emergency"])
    history = verify_history(chain.wire)
    assert history.key_seq == 2
    assert history.signing_key == public(chain.keys[2].signing)
    assert history.encryption_key == public(chain.keys[2].encryption)
    signing_keys = [public(keys.signing) for keys in chain.keys]
    assert [history.signing_key_at(seq) for seq in range(3)] == signing_keys
    assert history.to_list() == chain.wire
    assert statement_hash(chain.wire[0] | {}) != chain.statements[0].hash  # signatures not hashed
    assert chain.statements[1].prev == statement_hash(chain.statements[0].body())


@pytest.mark.parametrize("seq", [-1, 3, True, "0"])
def test_signing_key_at_unknown_seq(seq: object) -> None:
    history = verify_history(make_chain(["rotate", "rotate"]).wire)
    with pytest.raises(LookupError):
        history.signing_key_at(seq)  # type: ignore[arg-type]


def test_emergency_revokes_every_earlier_key() -> None:
    history = verify_history(make_chain(["rotate", "emergency", "rotate"]).wire)
    assert [history.is_revoked(seq) for seq in range(4)] == [True, True, False, False]


def test_extends() -> None:
    chain = make_chain(["rotate", "rotate"])
    short, full = verify_history(chain.wire[:2]), verify_history(chain.wire)
    assert full.extends(short) and full.extends(full) and not short.extends(full)
    assert verify_history(chain.wire, known=short) == full


# -- refusals ------------------------------------------------------------------------------------

def test_forged_genesis_signature() -> None:
    keys = Keys.new()
    assert reason_of([genesis(keys, signer=SigningKey.generate()).to_dict()]) == "forged"
    stranger = SigningKey.generate()
    assert reason_of([genesis(keys, recovery_signer=stranger).to_dict()]) == "forged"


def test_genesis_without_recovery_signature_is_forged() -> None:
    wire = make_chain([]).wire
    del wire[0]["recoverySignature"]
    assert reason_of(wire) == "forged"


def test_changed_field_after_signing_is_forged() -> None:
    wire = make_chain(["rotate"]).wire
    wire[1]["created"] += 1
    assert reason_of(wire) == "forged"


def test_rotation_by_a_stranger_is_forged() -> None:
    chain = make_chain([])
    statement = successor(chain.statements[0], Keys.new(chain.keys[0].recovery), "rotate",
                          signer=SigningKey.generate())
    assert reason_of([*chain.wire, statement.to_dict()]) == "forged"


def test_emergency_not_signed_by_the_recovery_key_is_forged() -> None:
    chain = make_chain([])
    by_signing_key = successor(chain.statements[0], Keys.new(), "emergency",
                               recovery_signer=chain.keys[0].signing)
    as_plain_signature = successor(chain.statements[0], Keys.new(), "emergency",
                                   signer=chain.keys[0].signing)
    assert reason_of([*chain.wire, by_signing_key.to_dict()]) == "forged"
    assert reason_of([*chain.wire, as_plain_signature.to_dict()]) == "forged"


def test_rotation_signed_by_the_recovery_key_posing_as_normal_is_forged() -> None:
    chain = make_chain([])
    new_keys = Keys.new(chain.keys[0].recovery)
    in_signature_field = successor(chain.statements[0], new_keys, "rotate",
                                   signer=chain.keys[0].recovery)
    in_recovery_field = successor(chain.statements[0], new_keys, "rotate",
                                  recovery_signer=chain.keys[0].recovery)
    assert reason_of([*chain.wire, in_signature_field.to_dict()]) == "forged"
    assert reason_of([*chain.wire, in_recovery_field.to_dict()]) == "forged"


def test_normal_rotation_cannot_replace_the_recovery_key() -> None:
    """A thief holding only the signing key must not lock the owner out of recovery."""
    chain = make_chain([])
    statement = successor(chain.statements[0], Keys.new(), "rotate", signer=chain.keys[0].signing)
    assert reason_of([*chain.wire, statement.to_dict()]) == "forged"


def test_emergency_rotation_must_replace_the_recovery_key() -> None:
    chain = make_chain([])
    statement = successor(chain.statements[0], Keys.new(chain.keys[0].recovery), "emergency",
                          recovery_signer=chain.keys[0].recovery)
    assert reason_of([*chain.wire, statement.to_dict()]) == "malformed"


def test_extra_signature_is_malformed() -> None:
    chain = make_chain([])
    statement = successor(chain.statements[0], Keys.new(chain.keys[0].recovery), "rotate",
                          signer=chain.keys[0].signing, recovery_signer=chain.keys[0].recovery)
    assert reason_of([*chain.wire, statement.to_dict()]) == "malformed"


def test_raw_signature_never_passes_as_a_key_statement() -> None:
    """Domain separation: signing a hub's 'challenge' cannot yield a rotation."""
    chain = make_chain([])
    thief_keys = Keys.new(chain.keys[0].recovery)
    unsigned = successor(chain.statements[0], thief_keys, "rotate")
    challenge = canonical_json(unsigned.body())
    wire = unsigned.to_dict() | {
        "signature": b64u(sign_with_key(chain.keys[0].signing, RAW_CONTEXT, challenge))}
    assert reason_of([*chain.wire, wire]) == "forged"
    wire["signature"] = b64u(sign_with_key(chain.keys[0].signing, KEY_STATEMENT_CONTEXT, challenge))
    assert verify_history([*chain.wire, wire]).key_seq == 1


def test_reordered_statements() -> None:
    wire = make_chain(["rotate", "rotate"]).wire
    assert reason_of([wire[0], wire[2], wire[1]]) == "reordered"


def test_gap_is_reordered() -> None:
    wire = make_chain(["rotate", "rotate"]).wire
    assert reason_of([wire[0], wire[2]]) == "reordered"


def test_prev_hash_mismatch_is_reordered() -> None:
    chain = make_chain(["rotate"])
    other = make_chain(["rotate"])
    # A valid statement from another identity's history, renumbered to fit, links nowhere.
    assert reason_of([chain.wire[0], other.wire[1]]) == "reordered"


def test_replayed_statement() -> None:
    wire = make_chain(["rotate"]).wire
    assert reason_of([*wire, wire[1]]) == "replayed"
    assert reason_of([wire[0], wire[0]]) == "replayed"


def test_truncated_against_min_seq() -> None:
    wire = make_chain(["rotate", "rotate"]).wire
    assert verify_history(wire, min_seq=2).key_seq == 2
    assert reason_of(wire[:2], min_seq=2) == "truncated"


def test_truncated_against_a_known_history() -> None:
    wire = make_chain(["rotate", "rotate"]).wire
    assert reason_of(wire[:2], known=verify_history(wire)) == "truncated"


def test_forked_history() -> None:
    chain = make_chain([])
    branch_a = successor(chain.statements[0], Keys.new(chain.keys[0].recovery), "rotate",
                         signer=chain.keys[0].signing)
    branch_b = successor(chain.statements[0], Keys.new(chain.keys[0].recovery), "rotate",
                         signer=chain.keys[0].signing)
    known = verify_history([*chain.wire, branch_a.to_dict()])
    assert reason_of([*chain.wire, branch_b.to_dict()], known=known) == "forked"


def test_wrong_expected_aid() -> None:
    wire = make_chain(["rotate"]).wire
    other = verify_history(make_chain([]).wire)
    assert reason_of(wire, expected_aid=other.aid) == "wrong-aid"
    assert reason_of(wire, known=other) == "wrong-aid"
    assert verify_history(wire, expected_aid=verify_history(wire).aid).key_seq == 1


def malformed_variants() -> list[tuple[str, object]]:
    wire = make_chain(["rotate"]).wire
    variants: list[tuple[str, object]] = [("empty", []), ("not a list", {"seq": 0}),
                                          ("text", "history"), ("not objects", [1, 2])]

    def variant(name: str, index: int, field: str, value: object) -> None:
        changed = copy.deepcopy(wire)
        if value is KeyError:
            del changed[index][field]
        else:
            changed[index][field] = value
        variants.append((name, changed))

    variant("unknown field", 1, "note", "hi")
    variant("missing field", 1, "created", KeyError)
    variant("bool seq", 0, "seq", False)
    variant("negative created", 1, "created", -1)
    variant("unknown kind", 1, "kind", "revoke")
    variant("genesis at seq 1", 1, "kind", "genesis")
    variant("genesis with prev", 0, "prev", wire[1]["prev"])
    variant("rotation without prev", 1, "prev", None)
    variant("short key", 1, "signingKey", b64u(b"x" * 31))
    variant("padded key", 1, "signingKey", wire[1]["signingKey"] + "=")
    variant("non-canonical base64", 1, "encryptionKey", wire[1]["encryptionKey"][:-1] + "9")
    variant("short signature", 1, "signature", b64u(b"s" * 63))
    return variants


@pytest.mark.parametrize(("name", "statements"), malformed_variants(),
                         ids=[name for name, _ in malformed_variants()])
def test_malformed(name: str, statements: object) -> None:
    assert reason_of(statements) == "malformed"  # type: ignore[arg-type]


def test_too_long_history_is_malformed() -> None:
    wire = make_chain([]).wire
    assert reason_of(wire * (MAX_HISTORY_LENGTH + 1)) == "malformed"


# -- properties ----------------------------------------------------------------------------------

FIXED_CHAIN = make_chain(["rotate", "emergency", "rotate"])
FIELDS = ["seq", "kind", "signingKey", "encryptionKey", "recoveryKey", "prev", "created",
          "signature", "recoverySignature"]
replacement_values = st.one_of(
    st.none(), st.booleans(), st.integers(-2, 5), st.text(max_size=50),
    st.sampled_from(["genesis", "rotate", "emergency"]),
    st.binary(min_size=32, max_size=32).map(b64u), st.binary(min_size=64, max_size=64).map(b64u),
    st.sampled_from([value for statement in FIXED_CHAIN.wire for value in statement.values()]))


@settings(max_examples=300, deadline=None)
@given(index=st.integers(0, 3), field=st.sampled_from(FIELDS), value=replacement_values)
def test_any_single_field_change_is_refused(index: int, field: str, value: object) -> None:
    wire = copy.deepcopy(FIXED_CHAIN.wire)
    assume(wire[index].get(field, KeyError) != value)
    wire[index][field] = value
    with pytest.raises(HistoryError):
        verify_history(wire)


@settings(max_examples=100, deadline=None)
@given(order=st.permutations(range(4)), drop=st.sets(st.integers(0, 3), max_size=2))
def test_only_the_true_order_verifies(order: list[int], drop: set[int]) -> None:
    chosen = [FIXED_CHAIN.wire[index] for index in order if index not in drop]
    assume(chosen)
    is_prefix = [statement["seq"] for statement in chosen] == list(range(len(chosen)))
    if is_prefix:
        assert verify_history(chosen).key_seq == len(chosen) - 1
    else:
        with pytest.raises(HistoryError):
            verify_history(chosen)
