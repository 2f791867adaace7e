"""The private side: key files, modes, loading, signing, and crash-safe rotation."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable
from pathlib import Path

import pytest

from anet_core.identity import (
    Identity,
    IdentityError,
    keystore,
    verify_history,
    verify_signature,
)
from anet_core.identity.keystore import RETAINED_PREVIOUS_ENCRYPTION_KEYS
from anet_core.identity.signatures import DOCUMENT_CONTEXT, KEY_STATEMENT_CONTEXT


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def key_texts(directory: Path) -> list[str]:
    return [path.read_text().strip() for path in directory.glob("*.key")]


@pytest.fixture
def directory(tmp_path: Path) -> Path:
    return tmp_path / "data" / "identity"


def test_create_writes_private_keys_0600_and_a_public_history(directory: Path) -> None:
    identity = Identity.create(directory)
    assert mode(directory) == 0o700
    key_files = sorted(path.name for path in directory.glob("*.key"))
    assert key_files == ["encryption-0.key", "recovery-0.key", "signing-0.key"]
    assert all(mode(directory / name) == 0o600 for name in key_files)
    assert mode(directory / "history.json") == 0o644
    history = json.loads((directory / "history.json").read_text())
    assert verify_history(history).aid == identity.aid
    assert identity.history == history and identity.key_seq == 0


def test_load_or_create(directory: Path) -> None:
    created, was_created = Identity.load_or_create(directory)
    loaded, was_created_again = Identity.load_or_create(directory)
    assert (was_created, was_created_again) == (True, False)
    assert loaded.aid == created.aid
    assert loaded.encryption_public_key == created.encryption_public_key


def test_create_refuses_to_overwrite(directory: Path) -> None:
    Identity.create(directory)
    with pytest.raises(IdentityError, match="already exists"):
        Identity.create(directory)


def test_load_without_identity_says_what_to_do(directory: Path) -> None:
    with pytest.raises(IdentityError, match="anet init"):
        Identity.load(directory)


def test_sign_and_verify_signature(directory: Path) -> None:
    identity = Identity.create(directory)
    signature = identity.sign(b"challenge")
    assert verify_signature(identity.signing_public_key, b"challenge", signature)
    assert not verify_signature(identity.signing_public_key, b"challenge!", signature)
    assert verify_signature(identity.signing_public_key, b"challenge", signature.hex()) is False
    assert not verify_signature("not a key", b"challenge", signature)
    assert not verify_signature(identity.signing_public_key, b"challenge", signature,
                                context=DOCUMENT_CONTEXT)
    with pytest.raises(ValueError, match="reserved"):
        identity.sign(b"x", context=KEY_STATEMENT_CONTEXT)
    with pytest.raises(ValueError, match="context"):
        identity.sign(b"x", context="Has Spaces")


def test_rotation_keeps_the_aid_and_advances_the_history(directory: Path) -> None:
    identity = Identity.create(directory)
    aid, first_recovery = identity.aid, identity.history[0]["recoveryKey"]
    old_signing_key = identity.signing_public_key
    history = identity.rotate()
    assert history.aid == aid and identity.key_seq == 1
    assert identity.signing_public_key != old_signing_key
    assert identity.history[1]["recoveryKey"] == first_recovery
    identity.rotate(emergency=True)
    assert identity.history[2]["kind"] == "emergency"
    assert identity.history[2]["recoveryKey"] != first_recovery
    loaded = Identity.load(directory)
    assert (loaded.aid, loaded.key_seq, loaded.history) == (aid, 2, identity.history)
    assert verify_signature(loaded.signing_public_key, b"m", loaded.sign(b"m"))


def test_rotation_deletes_old_signing_keys_and_keeps_recent_encryption_keys(
        directory: Path) -> None:
    identity = Identity.create(directory)
    for _ in range(4):
        identity.rotate()
    names = sorted(path.name for path in directory.glob("*.key"))
    kept = [f"encryption-{seq}.key" for seq in range(4 - RETAINED_PREVIOUS_ENCRYPTION_KEYS, 5)]
    assert names == sorted([*kept, "recovery-4.key", "signing-4.key"])
    assert len(identity.encryption_private_keys()) == RETAINED_PREVIOUS_ENCRYPTION_KEYS + 1
    loaded = Identity.load(directory)
    public = [key.public for key in loaded.encryption_private_keys()]
    expected = [verify_history(identity.history).statements[seq].encryption_key
                for seq in (4, 3, 2)]
    assert public == expected


def crash_on_write(monkeypatch: pytest.MonkeyPatch, crash_at: int) -> Callable[[], int]:
    """Make the ``crash_at``-th file write of the key store raise, as a power cut would."""
    writes = 0

    def wrap(real: Callable[..., None]) -> Callable[..., None]:
        def write(*args: object, **kwargs: object) -> None:
            nonlocal writes
            writes += 1
            if writes == crash_at:
                raise OSError("simulated crash")
            real(*args, **kwargs)
        return write

    monkeypatch.setattr(keystore, "write_private", wrap(keystore.write_private))
    monkeypatch.setattr(keystore, "write_atomic", wrap(keystore.write_atomic))
    return lambda: writes


@pytest.mark.parametrize("emergency", [False, True])
@pytest.mark.parametrize("crash_at", [1, 2, 3, 4])
def test_rotation_is_crash_safe_at_every_write(directory: Path, monkeypatch: pytest.MonkeyPatch,
                                               crash_at: int, emergency: bool) -> None:
    """Writes 1-3 are the new key files, write 4 is the history: the commit point."""
    identity = Identity.create(directory)
    identity.rotate()
    before = identity.history
    with monkeypatch.context() as patch:
        crash_on_write(patch, crash_at)
        with pytest.raises(OSError, match="simulated crash"):
            identity.rotate(emergency=emergency)
    loaded = Identity.load(directory)
    assert loaded.history == before and identity.history == before
    assert verify_history(loaded.history, expected_aid=identity.aid).key_seq == 1
    assert verify_signature(loaded.signing_public_key, b"m", loaded.sign(b"m"))
    # The next rotation overwrites the orphaned key files and succeeds.
    loaded.rotate(emergency=emergency)
    assert Identity.load(directory).key_seq == 2


def test_rotation_writes_exactly_four_files(directory: Path,
                                            monkeypatch: pytest.MonkeyPatch) -> None:
    identity = Identity.create(directory)
    count = crash_on_write(monkeypatch, crash_at=0)
    identity.rotate()
    assert count() == 4


def test_crash_during_create_leaves_no_identity(directory: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    with monkeypatch.context() as patch:
        crash_on_write(patch, crash_at=4)  # the history, after the three key files
        with pytest.raises(OSError, match="simulated crash"):
            Identity.create(directory)
    identity, created = Identity.load_or_create(directory)
    assert created and Identity.load(directory).aid == identity.aid


def test_crash_after_commit_before_cleanup_loads_the_new_keys(
        directory: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    identity = Identity.create(directory)

    def crash(*_: object) -> None:
        raise OSError("simulated crash")

    monkeypatch.setattr(keystore, "_delete_superseded_key_files", crash)
    with pytest.raises(OSError):
        identity.rotate()
    monkeypatch.undo()
    loaded = Identity.load(directory)
    assert loaded.key_seq == 1
    assert (directory / "signing-0.key").exists()  # left behind, harmless
    loaded.rotate()
    assert not (directory / "signing-0.key").exists()


def test_key_file_readable_by_others_is_refused(directory: Path) -> None:
    Identity.create(directory)
    os.chmod(directory / "signing-0.key", 0o644)
    with pytest.raises(IdentityError, match="chmod 600") as caught:
        Identity.load(directory)
    assert not any(text in str(caught.value) for text in key_texts(directory))


def test_key_file_that_does_not_match_the_history_is_refused(directory: Path,
                                                             tmp_path: Path) -> None:
    Identity.create(directory)
    other = Identity.create(tmp_path / "other")
    (directory / "signing-0.key").write_bytes((other.directory / "signing-0.key").read_bytes())
    with pytest.raises(IdentityError, match="does not match") as caught:
        Identity.load(directory)
    assert not any(text in str(caught.value) for text in key_texts(directory))


def test_missing_key_file_is_refused(directory: Path) -> None:
    Identity.create(directory)
    (directory / "recovery-0.key").unlink()
    with pytest.raises(IdentityError, match="missing"):
        Identity.load(directory)


def test_tampered_history_file_is_refused(directory: Path) -> None:
    identity = Identity.create(directory)
    identity.rotate()
    history = identity.history
    history[1]["created"] += 1
    (directory / "history.json").write_text(json.dumps(history))
    with pytest.raises(IdentityError, match="forged"):
        Identity.load(directory)


def test_no_private_key_in_reprs(directory: Path) -> None:
    identity = Identity.create(directory)
    shown = repr(identity) + str(identity) + repr(identity.signer()) + repr(identity._state)
    assert identity.aid in repr(identity)
    assert not any(text in shown for text in key_texts(directory))


def test_signer_snapshot_survives_rotation(directory: Path) -> None:
    identity = Identity.create(directory)
    signer = identity.signer()
    identity.rotate()
    history = identity.verified_history
    signature = signer.sign(b"m")
    assert signer.key_seq == 0
    assert verify_signature(identity.history[0]["signingKey"], b"m", signature)
    assert history.signing_key_at(signer.key_seq) != history.signing_key
