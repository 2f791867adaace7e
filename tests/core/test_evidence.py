"""The evidence chain: appends, re-opening, concurrency, and detection of every tampering."""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import anet_core.evidence.chain as chain_module
from anet_core.evidence import (
    HEAD_FILE,
    MAX_HEAD_LAG,
    EvidenceChain,
    EvidenceError,
    EvidenceHead,
    check_kind,
    read_records,
    read_segment,
    record_hash,
    verify,
)
from anet_core.evidence.format import MAX_RECORD_BYTES
from anet_core.identity import Identity
from anet_core.identity.signatures import EVIDENCE_CONTEXT
from anet_core.settings import DataPaths
from anet_core.store import Store, open_store
from anet_core.util.canonical import b64u, canonical_json
from tests.support.waiting import eventually


@pytest.fixture(scope="module")
def owner(tmp_path_factory: pytest.TempPathFactory) -> Identity:
    return Identity.create(tmp_path_factory.mktemp("owner") / "identity")


@pytest.fixture
def path(tmp_path: Path) -> Path:
    return DataPaths(tmp_path).evidence_chain


def fill(path: Path, identity: Identity, count: int) -> EvidenceChain:
    chain = EvidenceChain(path, identity)
    for index in range(count):
        chain.append("task.accepted", {"task": f"t{index}"})
    return chain


def lines(path: Path) -> list[bytes]:
    return path.read_bytes().splitlines(keepends=True)


def rewrite(path: Path, change: Callable[[list[bytes]], list[bytes]]) -> None:
    path.write_bytes(b"".join(change(lines(path))))


def reasons(path: Path, identity: Identity, **kwargs: object) -> set[str]:
    return {issue.reason for issue in verify(path, identity.verified_history, **kwargs).issues}


# -- appending -----------------------------------------------------------------------------------

def test_append_links_signs_and_moves_the_head(path: Path, owner: Identity) -> None:
    chain = EvidenceChain(path, owner)
    first = chain.append("task.accepted", {"task": "t1"})
    second = chain.append("anet.backend.forwarded", {"task": "t1", "backend": "local"})
    assert path == path.parent / "chain.jsonl" and path.parent.name == "evidence"
    assert (first["seq"], first["prev"]) == (0, None)
    assert (second["seq"], second["prev"]) == (1, first["hash"])
    assert first.keys() == {"seq", "ts", "kind", "data", "prev", "hash", "signer", "keySeq",
                            "signature"}
    assert first["signer"] == owner.aid and first["keySeq"] == owner.key_seq
    assert [json.loads(line) for line in lines(path)] == [first, second]
    head = json.loads((path.parent / HEAD_FILE).read_text())
    assert (head["seq"], head["hash"]) == (1, second["hash"])
    report = verify(path, owner.verified_history)
    assert report.ok and report.records == 2 and report.last == EvidenceHead(1, second["hash"])


def test_reopening_continues_the_chain(path: Path, owner: Identity) -> None:
    fill(path, owner, 3)
    record = EvidenceChain(path, owner).append("task.failed", {"task": "t3"})
    assert record["seq"] == 3 and record["prev"] == json.loads(lines(path)[2])["hash"]
    assert verify(path, owner.verified_history).ok


@pytest.mark.parametrize("kind", ["task", "Task.accepted", "task.", ".task", "task..x", "task.1x",
                                  "task accepted", "t." + "x" * 100, "", 3])
def test_kind_must_be_dotted_lowercase(path: Path, owner: Identity, kind: object) -> None:
    with pytest.raises(ValueError, match="dotted lowercase"):
        EvidenceChain(path, owner).append(kind, {})  # type: ignore[arg-type]


@pytest.mark.parametrize("kind", ["task.accepted", "backends.failed", "x402.payment-settled",
                                  "payment.v2_settled"])
def test_kinds_in_use_are_accepted(kind: str) -> None:
    assert check_kind(kind) == kind


def test_a_chain_with_the_earlier_backend_kinds_still_verifies(path: Path, owner: Identity) -> None:
    chain = EvidenceChain(path, owner)
    for kind in ("task.accepted", "anet.backend.forwarded", "anet.backend.failed",
                 "backends.forwarded"):
        chain.append(kind, {"task": "t1"})
    report = verify(path, owner.verified_history)
    assert report.ok and report.records == 4


def test_data_must_be_an_object_of_bounded_size(path: Path, owner: Identity) -> None:
    chain = EvidenceChain(path, owner)
    with pytest.raises(TypeError):
        chain.append("task.accepted", ["list"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="exceeds"):
        chain.append("task.accepted", {"blob": "x" * 300_000})
    with pytest.raises(ValueError, match="not JSON"):
        chain.append("task.accepted", {"at": object()})
    with pytest.raises(ValueError, match="not JSON"):
        chain.append("task.accepted", {"ratio": float("nan")})
    assert not path.exists() or path.read_bytes() == b""


def test_an_append_signs_its_last_record_which_vouches_for_the_others(
        path: Path, owner: Identity) -> None:
    chain = fill(path, owner, 1)
    records = chain.append_all([("task.accepted", {"n": n}) for n in range(3)])
    signature_fields = {"signer", "keySeq", "signature"}
    assert [signature_fields & record.keys() for record in records] == \
        [set(), set(), signature_fields]  # type: ignore[union-attr]
    assert [json.loads(line).keys() >= signature_fields for line in lines(path)] == \
        [True, False, False, True]
    report = verify(path, owner.verified_history)
    assert report.ok and report.last == EvidenceHead(3, records[-1]["hash"])  # type: ignore
    assert [(read.record["seq"], read.signed_in, read.problem)
            for read in read_records(path, owner.verified_history)] == \
        [(0, 0, ""), (1, 3, ""), (2, 3, ""), (3, 3, "")]


@settings(max_examples=40, deadline=None)
@given(data=st.lists(st.dictionaries(st.text(min_size=1, max_size=8),
                                     st.recursive(st.none() | st.booleans() | st.integers()
                                                  | st.text(max_size=12),
                                                  lambda inner: st.lists(inner, max_size=3)
                                                  | st.dictionaries(st.text(max_size=6), inner,
                                                                    max_size=3),
                                                  max_leaves=6), max_size=4),
                     min_size=1, max_size=4))
def test_every_line_is_its_records_canonical_json(owner: Identity,
                                                 data: list[dict[str, object]]) -> None:
    """An unsigned record's line is spliced from the content its hash was made of (nothing
    encoded twice): it must still be the record's canonical JSON, byte for byte."""
    with tempfile.TemporaryDirectory() as directory:
        path = DataPaths(Path(directory)).evidence_chain
        EvidenceChain(path, owner).append_all([("task.accepted", item) for item in data])
        assert [line.rstrip(b"\n") for line in lines(path)] == \
            [canonical_json(json.loads(line)) for line in lines(path)]
        assert verify(path, owner.verified_history).ok


def test_records_after_the_last_signed_one_prove_nothing_and_the_next_append_cuts_them(
        path: Path, owner: Identity) -> None:
    """A record written without the key (or what a crash left of an append before its signed
    last line) is vouched for by nothing, and the node does not sign over it."""
    fill(path, owner, 2)
    last = json.loads(lines(path)[-1])
    data = {"task": "forged"}
    forged = {"seq": 2, "ts": last["ts"], "kind": "task.accepted", "data": data,
              "prev": last["hash"],
              "hash": record_hash(2, last["ts"], "task.accepted", data, last["hash"])}
    with path.open("ab") as handle:
        handle.write(canonical_json(forged) + b"\n")
    report = verify(path, owner.verified_history)
    assert {issue.reason for issue in report.issues} == {"unsigned-tail"}
    assert report.last == EvidenceHead(1, last["hash"])
    read = read_records(path, owner.verified_history)[-1]
    assert read.signed_in is None and "not signed" in read.problem
    appended = EvidenceChain(path, owner).append("task.answered", {"n": 2})
    assert appended["seq"] == 2 and appended["prev"] == last["hash"]
    assert verify(path, owner.verified_history).ok and b"forged" not in path.read_bytes()


def test_a_segment_reads_what_was_appended_since_the_last_signed_record_it_read(
        path: Path, owner: Identity) -> None:
    """A reader that keeps where it stopped (``end``, ``last``) reads only the records appended
    since; an unsigned tail is read, but the next read starts before it (an append may cut
    it); a chain that does not continue where it stopped is refused (None)."""
    history = owner.verified_history
    chain = fill(path, owner, 2)
    first = read_segment(path, history)
    assert first is not None and [read.record["seq"] for read in first.records] == [0, 1]
    assert first.end == path.stat().st_size and first.last is not None
    assert first.last.seq == 1
    chain.append_all([("task.accepted", {"n": 2}), ("payment.receipt", {"n": 3})])
    later = read_segment(path, history, start=first.end, after=first.last, kind="payment.*")
    assert later is not None and [read.record["data"] for read in later.records] == [{"n": 3}]
    assert later.last is not None and (later.last.seq, later.end) == (3, path.stat().st_size)
    nothing_new = read_segment(path, history, start=later.end, after=later.last)
    assert nothing_new is not None and nothing_new.records == [] and nothing_new.end == later.end
    last = json.loads(lines(path)[-1])
    data = {"n": 4}
    with path.open("ab") as handle:  # what a crash can leave: a record no signature vouches for
        handle.write(canonical_json({"seq": 4, "ts": last["ts"], "kind": "task.accepted",
                                     "data": data, "prev": last["hash"], "hash": record_hash(
                                         4, last["ts"], "task.accepted", data, last["hash"])})
                     + b"\n")
    tail = read_segment(path, history, start=later.end, after=later.last)
    assert tail is not None and "not signed" in tail.records[0].problem
    assert (tail.end, tail.last) == (later.end, later.last)
    assert read_segment(path, history, start=later.end, after=first.last) is None
    path.write_bytes(b"".join(lines(path)[:2]))  # cut before where the reader stopped
    assert read_segment(path, history, start=later.end, after=later.last) is None


def test_an_unsigned_record_changed_with_its_hash_breaks_the_link_to_its_signed_one(
        path: Path, owner: Identity) -> None:
    chain = fill(path, owner, 1)
    chain.append_all([("task.accepted", {"n": n}) for n in range(3)])

    def change(kept: list[bytes]) -> list[bytes]:
        record = json.loads(kept[2])
        record["data"] = {"n": 99}
        record["hash"] = record_hash(record["seq"], record["ts"], record["kind"], record["data"],
                                     record["prev"])
        return [*kept[:2], canonical_json(record) + b"\n", *kept[3:]]

    rewrite(path, change)
    report = verify(path, owner.verified_history)
    assert [(issue.reason, issue.seq) for issue in report.issues] == [("changed", 3)]
    assert [read.signed_in for read in read_records(path, owner.verified_history)] == \
        [0, None, None, 3]


def test_every_record_is_held_to_the_size_it_has_when_it_ends_its_append(
        path: Path, owner: Identity) -> None:
    chain = fill(path, owner, 1)
    chain.append("task.accepted", {"blob": ""})
    room = MAX_RECORD_BYTES - len(lines(path)[-1])
    fits, too_big = {"blob": "x" * room}, {"blob": "x" * (room + 1)}
    outcomes = chain.append_all([("task.accepted", too_big), ("task.accepted", fits),
                                 ("task.accepted", fits)])
    assert isinstance(outcomes[0], ValueError) and "exceeds" in str(outcomes[0])
    assert [record["seq"] for record in outcomes[1:]] == [2, 3]  # type: ignore[index]
    assert len(lines(path)[-1]) == MAX_RECORD_BYTES  # signed, to the byte
    assert len(lines(path)[-2]) < MAX_RECORD_BYTES  # unsigned: room to spare
    assert verify(path, owner.verified_history).ok


async def test_a_record_that_is_no_json_fails_alone(path: Path, owner: Identity) -> None:
    """The others of its append are appended all the same, and every caller hears back (the
    writer's append once failed whole, and the futures of the whole batch never ended)."""
    chain = EvidenceChain(path, owner)
    async with asyncio.timeout(10):
        good, bad = await chain.record_all([("task.accepted", {"n": 1}),
                                            ("task.accepted", {"at": object()})])
        await chain.close()
    assert isinstance(good, dict) and good["seq"] == 0
    assert isinstance(bad, ValueError) and "not JSON" in str(bad)
    assert verify(path, owner.verified_history).records == 1


def test_concurrent_appends_from_threads(path: Path, owner: Identity) -> None:
    chain = EvidenceChain(path, owner)
    threads = [threading.Thread(target=lambda n=n: [chain.append("task.accepted", {"n": n, "i": i})
                                                   for i in range(20)]) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    records = [json.loads(line) for line in lines(path)]
    assert [record["seq"] for record in records] == list(range(160))
    assert verify(path, owner.verified_history).ok


def test_two_chain_objects_on_one_file_interleave(path: Path, owner: Identity) -> None:
    """Another process (a CLI command) appending meanwhile: each re-reads the tail when locked."""
    first, second = EvidenceChain(path, owner), EvidenceChain(path, owner)
    for index in range(6):
        (first if index % 2 else second).append("task.accepted", {"i": index})
    assert verify(path, owner.verified_history).ok


def test_rotation_mid_chain(path: Path, tmp_path: Path) -> None:
    identity = Identity.create(tmp_path / "identity")
    chain = fill(path, identity, 2)
    identity.rotate()
    chain.append("task.accepted", {"after": "rotate"})
    identity.rotate(emergency=True)
    chain.append("task.accepted", {"after": "emergency"})
    assert [json.loads(line)["keySeq"] for line in lines(path)] == [0, 0, 1, 2]
    assert verify(path, identity.verified_history).ok


def test_torn_tail_is_reported_then_discarded_by_the_next_append(path: Path,
                                                                 owner: Identity) -> None:
    chain = fill(path, owner, 3)
    with path.open("ab") as handle:
        handle.write(b'{"seq": 3, "ts": 1')
    assert reasons(path, owner) == {"torn-tail"}
    record = EvidenceChain(path, owner).append("task.accepted", {})
    assert record["seq"] == 3
    assert verify(path, owner.verified_history).ok
    assert chain.append("task.accepted", {})["seq"] == 4  # the other object notices the change


def test_append_refuses_a_truncated_chain(path: Path, owner: Identity) -> None:
    fill(path, owner, 4)
    rewrite(path, lambda old: old[:2])
    with pytest.raises(EvidenceError, match="removed or rewritten"):
        EvidenceChain(path, owner).append("task.accepted", {})
    assert len(lines(path)) == 2


def test_append_refuses_a_rewritten_tail(path: Path, owner: Identity, tmp_path: Path) -> None:
    fill(path, owner, 2)
    other = DataPaths(tmp_path / "other").evidence_chain
    fill(other, owner, 2)
    path.write_bytes(other.read_bytes())  # a different valid chain, same length
    with pytest.raises(EvidenceError):
        EvidenceChain(path, owner).append("task.accepted", {})


def test_append_tolerates_a_head_one_record_behind(path: Path, owner: Identity) -> None:
    """A crash between the record's fsync and the head's replacement."""
    fill(path, owner, 2)
    saved_head = (path.parent / HEAD_FILE).read_bytes()
    EvidenceChain(path, owner).append("task.accepted", {})
    (path.parent / HEAD_FILE).write_bytes(saved_head)
    assert verify(path, owner.verified_history).ok
    assert EvidenceChain(path, owner).append("task.accepted", {})["seq"] == 3


# -- detection -----------------------------------------------------------------------------------

def test_changed_record(path: Path, owner: Identity) -> None:
    fill(path, owner, 5)

    def change(old: list[bytes]) -> list[bytes]:
        record = json.loads(old[2])
        record["data"]["task"] = "other"
        return [*old[:2], canonical_json(record) + b"\n", *old[3:]]

    rewrite(path, change)
    assert reasons(path, owner) == {"changed"}


def test_changed_record_with_recomputed_hash(path: Path, owner: Identity) -> None:
    fill(path, owner, 5)

    def change(old: list[bytes]) -> list[bytes]:
        record = json.loads(old[4])
        record["data"]["task"] = "other"
        record["hash"] = record_hash(record["seq"], record["ts"], record["kind"], record["data"],
                                     record["prev"])
        return [*old[:4], canonical_json(record) + b"\n"]

    rewrite(path, change)
    assert "changed" in reasons(path, owner)


def test_record_signed_by_someone_else(path: Path, owner: Identity, tmp_path: Path) -> None:
    intruder = Identity.create(tmp_path / "intruder")
    fill(path, owner, 2)
    record = json.loads(lines(path)[1])
    unsigned = {key: value for key, value in record.items() if key != "signature"}
    record["signature"] = b64u(intruder.sign(canonical_json(unsigned), context=EVIDENCE_CONTEXT))
    rewrite(path, lambda old: [old[0], canonical_json(record) + b"\n"])
    assert "changed" in reasons(path, owner)


@pytest.mark.parametrize("index", [0, 2])
def test_removed_record(path: Path, owner: Identity, index: int) -> None:
    fill(path, owner, 5)
    rewrite(path, lambda old: old[:index] + old[index + 1:])
    assert reasons(path, owner) == {"removed"}


def test_duplicated_record_is_inserted(path: Path, owner: Identity) -> None:
    fill(path, owner, 4)
    rewrite(path, lambda old: [*old[:2], old[1], *old[2:]])
    assert reasons(path, owner) == {"inserted"}


def test_forged_record_is_inserted(path: Path, owner: Identity) -> None:
    fill(path, owner, 4)

    def insert(old: list[bytes]) -> list[bytes]:
        forged = json.loads(old[1]) | {"data": {"task": "forged"}}
        return [*old[:2], canonical_json(forged) + b"\n", *old[2:]]

    rewrite(path, insert)
    assert reasons(path, owner) == {"inserted"}


def test_record_from_another_chain_of_the_same_identity(path: Path, owner: Identity,
                                                        tmp_path: Path) -> None:
    fill(path, owner, 4)
    other = DataPaths(tmp_path / "other").evidence_chain
    fill(other, owner, 4)
    rewrite(path, lambda old: [*old[:2], lines(other)[2], *old[3:]])
    assert "changed" in reasons(path, owner)  # validly signed, but links to nothing here


def test_reordered_records(path: Path, owner: Identity) -> None:
    fill(path, owner, 5)
    rewrite(path, lambda old: [old[0], old[2], old[1], *old[3:]])
    assert reasons(path, owner) == {"reordered"}


def test_truncated_tail_detected_by_the_head(path: Path, owner: Identity) -> None:
    fill(path, owner, 5)
    rewrite(path, lambda old: old[:3])
    assert reasons(path, owner) == {"truncated"}


def test_truncated_tail_with_rolled_back_head_needs_a_checkpoint(path: Path,
                                                                 owner: Identity) -> None:
    fill(path, owner, 3)
    old_head = (path.parent / HEAD_FILE).read_bytes()
    EvidenceChain(path, owner).append("task.accepted", {})
    EvidenceChain(path, owner).append("task.accepted", {})
    checkpoint = verify(path, owner.verified_history).last
    assert checkpoint is not None and checkpoint.seq == 4
    rewrite(path, lambda old: old[:3])
    (path.parent / HEAD_FILE).write_bytes(old_head)
    assert verify(path, owner.verified_history).ok  # undetectable from the files alone
    assert reasons(path, owner, checkpoint=checkpoint) == {"truncated"}


def test_checkpoint_hash_mismatch(path: Path, owner: Identity) -> None:
    fill(path, owner, 3)
    assert reasons(path, owner, checkpoint=EvidenceHead(1, "x")) == {"head-mismatch"}


def test_head_removed_or_forged(path: Path, owner: Identity, tmp_path: Path) -> None:
    fill(path, owner, 3)
    head_path = path.parent / HEAD_FILE
    head = json.loads(head_path.read_text())
    head_path.write_text(json.dumps(head | {"seq": 1}))
    assert reasons(path, owner) == {"head-mismatch"}
    head_path.write_text("{broken")
    assert reasons(path, owner) == {"head-mismatch"}
    head_path.unlink()
    assert reasons(path, owner) == {"no-head"}


def test_malformed_line(path: Path, owner: Identity) -> None:
    fill(path, owner, 3)
    rewrite(path, lambda old: [old[0], b"not json\n", *old[1:]])
    assert reasons(path, owner) == {"malformed"}


def test_missing_chain_verifies_empty(path: Path, owner: Identity) -> None:
    report = verify(path, owner.verified_history)
    assert report.ok and report.records == 0 and report.last is None


def test_wrong_history(path: Path, owner: Identity, tmp_path: Path) -> None:
    fill(path, owner, 2)
    stranger = Identity.create(tmp_path / "stranger")
    assert "changed" in reasons(path, stranger)


# -- properties ----------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def pristine(owner: Identity, tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = DataPaths(tmp_path_factory.mktemp("pristine")).evidence_chain
    chain = fill(path, owner, 2)
    chain.append_all([("task.accepted", {"task": f"t{index}"}) for index in range(2, 5)])
    chain.append("task.accepted", {"task": "t5"})  # seq 2 and 3 are signed by seq 4 only
    return path


operations = st.one_of(
    st.tuples(st.just("delete"), st.integers(0, 5)),
    st.tuples(st.just("duplicate"), st.integers(0, 5)),
    st.tuples(st.just("swap"), st.integers(0, 5), st.integers(0, 5)),
    st.tuples(st.just("truncate"), st.integers(0, 5)),
)


@settings(max_examples=120, deadline=None)
@given(edits=st.lists(operations, min_size=1, max_size=3))
def test_any_edit_of_the_lines_is_detected(owner: Identity, pristine: Path,
                                           edits: list[tuple]) -> None:
    original = lines(pristine)
    edited = list(original)
    for edit in edits:
        if not edited:
            break
        kind, index, *rest = edit
        index %= len(edited)
        if kind == "delete":
            del edited[index]
        elif kind == "duplicate":
            edited.insert(index, edited[index])
        elif kind == "swap":
            other = rest[0] % len(edited)
            edited[index], edited[other] = edited[other], edited[index]
        else:
            edited = edited[:index]
    with tempfile.TemporaryDirectory() as scratch:
        path = Path(scratch) / "evidence" / "chain.jsonl"
        shutil.copytree(pristine.parent, path.parent)
        path.write_bytes(b"".join(edited))
        report = verify(path, owner.verified_history)
    assert report.ok == (edited == original)


async def test_records_from_the_loop_share_appends_and_a_lagging_head_continues(
        path: Path, owner: Identity) -> None:
    chain = EvidenceChain(path, owner)
    chain.append("task.accepted", {"n": 0})  # the first record brings its head
    outcomes = await chain.record_all([("task.accepted", {"n": n}) for n in range(1, 11)]
                                      + [("Not A Kind", {})])
    assert [record["seq"] for record in outcomes[:-1]] == list(range(1, 11))  # type: ignore
    assert isinstance(outcomes[-1], ValueError)  # refused alone, the others appended
    head = json.loads((path.parent / HEAD_FILE).read_text())
    assert head["seq"] == 0  # the head waits for the writer to idle: a crash now leaves it here
    assert verify(path, owner.verified_history).ok
    restarted = EvidenceChain(path, owner)  # the node after that crash continues the chain
    assert restarted.append("task.answered", {"n": 11})["seq"] == 11
    await chain.close()
    report = verify(path, owner.verified_history)
    assert report.ok and report.records == 12 and report.last.seq == 11  # type: ignore


async def test_a_chain_the_loop_appends_to_refuses_appends_that_would_overtake_its_queue(
        path: Path, owner: Identity) -> None:
    """A synchronous append (from a thread, say) would go ahead of the records that wait for
    the loop's next append: the chain would not hold them in the order they were made."""
    chain = EvidenceChain(path, owner)
    chain.append("task.accepted", {"n": 0})  # before the loop used it: a chain like the CLI's
    chain.record_later("payment.refuse", {"n": 1})
    with pytest.raises(RuntimeError, match="await chain.record"):
        await asyncio.to_thread(chain.append, "payment.authorize", {"n": 2})
    await chain.record("payment.authorize", {"n": 2})
    assert [json.loads(line)["kind"] for line in lines(path)] == [
        "task.accepted", "payment.refuse", "payment.authorize"]
    await chain.close()


async def test_a_new_chains_first_record_from_the_loop_brings_its_head(
        path: Path, owner: Identity) -> None:
    """A crash right after a new chain's first appends from the loop (no idle, no stop) must
    leave a chain that verifies: only one record may ever lack a head."""
    chain = EvidenceChain(path, owner)
    await chain.record_all([("task.accepted", {"n": 0})])
    await chain.record_all([("task.accepted", {"n": n}) for n in range(1, 6)])
    assert json.loads((path.parent / HEAD_FILE).read_text())["seq"] == 0
    report = verify(path, owner.verified_history)  # the node is SIGKILLed here
    assert report.ok and report.records == 6, report.issues


def test_a_first_record_a_crash_left_headless_gets_its_head_before_the_next(
        path: Path, owner: Identity) -> None:
    EvidenceChain(path, owner).append("task.accepted", {"n": 0})
    (path.parent / HEAD_FILE).unlink()  # the crash came between the fsync and the head
    assert verify(path, owner.verified_history).ok
    EvidenceChain(path, owner).append_all([("task.accepted", {"n": 1})], head=False)
    assert json.loads((path.parent / HEAD_FILE).read_text())["seq"] >= 0
    assert verify(path, owner.verified_history).ok


def test_a_head_further_behind_than_a_crash_can_leave_it_is_refused(
        path: Path, owner: Identity) -> None:
    chain = fill(path, owner, 2)
    old_head = (path.parent / HEAD_FILE).read_bytes()
    for n in range(MAX_HEAD_LAG + 1):
        chain.append("task.accepted", {"n": n})
    (path.parent / HEAD_FILE).write_bytes(old_head)
    with pytest.raises(EvidenceError, match="removed or rewritten"):
        EvidenceChain(path, owner).append("task.accepted", {"n": -1})


# --- the daemon's journal (the store keeps a record until the chain is synced) --------------

async def test_records_kept_by_the_journal_are_appended_without_a_sync_and_forgotten_once_synced(
        tmp_path: Path, path: Path, owner: Identity) -> None:
    async with open_store(tmp_path / "anet.db") as store:
        chain = EvidenceChain(path, owner, journal=store)
        await chain.record_all([("task.accepted", {"n": 0})])  # a new chain's first: synced
        synced = path.stat().st_size
        outcomes = await chain.record_all([("task.accepted", {"n": n}) for n in range(1, 6)])
        assert [record["seq"] for record in outcomes] == [1, 2, 3, 4, 5]  # type: ignore[index]
        assert path.stat().st_size > synced  # in the chain at once, for every reader
        assert [record.data["n"] for record in store.journaled_evidence()] == [1, 2, 3, 4, 5]
        await chain.close()  # syncs the chain and moves the head
        assert store.journaled_evidence() == []
    report = verify(path, owner.verified_history)
    assert report.ok and report.records == 6 and report.last.seq == 5  # type: ignore[union-attr]


async def test_records_nobody_waits_for_are_appended_together_after_the_work_they_started(
        tmp_path: Path, path: Path, owner: Identity, monkeypatch: pytest.MonkeyPatch) -> None:
    """The task layer queues a transaction's records and goes on (``Services.run``): what the
    transaction started runs first, and records queued meanwhile share one append."""
    monkeypatch.setattr(chain_module, "APPEND_AFTER_S", 60.0)  # no test waits for it
    async with open_store(tmp_path / "anet.db") as store:
        chain = EvidenceChain(path, owner, journal=store)
        await chain.record_all([("task.accepted", {"n": 0})])  # a new chain's first: synced
        appends: list[int] = []
        append_all = chain.append_all

        def counted(items, **options):  # type: ignore[no-untyped-def]
            appends.append(len(items))
            return append_all(items, **options)

        monkeypatch.setattr(chain, "append_all", counted)
        for n in range(1, 4):
            chain.record_later("task.accepted", {"n": n})
            await asyncio.sleep(0)  # the work the record's transaction started runs first
        assert appends == [] and [r.data["n"] for r in store.journaled_evidence()] == [1, 2, 3]
        await store.flush()  # what makes them durable, as the task layer does
        outcomes = await chain.record_all([("task.answered", {"n": 4})])
        assert appends == [4]  # the awaited record brings the append, the waiting ones with it
        assert outcomes[0]["seq"] == 4  # type: ignore[index]
        await chain.close()
    report = verify(path, owner.verified_history)
    assert report.ok and report.records == 5, report.issues


async def test_an_idle_chain_moves_its_head_and_the_journal_forgets(
        tmp_path: Path, path: Path, owner: Identity, monkeypatch: pytest.MonkeyPatch) -> None:
    """Appends from the loop leave the head behind; once no record came for HEAD_IDLE_S, the
    chain is synced, the head names its last record and the journal lets go of them."""
    monkeypatch.setattr(chain_module, "HEAD_IDLE_S", 0.05)
    async with open_store(tmp_path / "anet.db") as store:
        chain = EvidenceChain(path, owner, journal=store)
        await chain.record_all([("task.accepted", {"n": 0})])  # a new chain's first: synced
        for n in range(1, 4):
            chain.record_later("task.accepted", {"n": n})
        await store.flush()
        await eventually(lambda: json.loads((path.parent / HEAD_FILE).read_text())["seq"] == 3)
        await eventually(lambda: store.journaled_evidence() == [])
        await chain.close()
    assert verify(path, owner.verified_history).records == 4


async def test_a_record_nobody_waits_for_that_the_chain_refuses_is_logged(
        tmp_path: Path, path: Path, owner: Identity, caplog: pytest.LogCaptureFixture) -> None:
    async with open_store(tmp_path / "anet.db") as store:
        chain = EvidenceChain(path, owner, journal=store)
        chain.record_later("Not A Kind", {"n": 0})
        chain.record_later("task.accepted", {"n": 1, "huge": "x" * MAX_RECORD_BYTES})
        chain.record_later("task.accepted", {"n": 2})
        await store.flush()
        await chain.close()
    failures = [record.getMessage() for record in caplog.records
                if "event=evidence-failed" in record.getMessage()]
    assert len(failures) == 2 and "Not A Kind" in failures[0] and "exceeds" in failures[1]
    assert [json.loads(line)["data"]["n"] for line in lines(path)] == [2]


def syncs_and_appends(store: Store, chain: EvidenceChain,
                      monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """From now on, each sync of the store's WAL and each append of the chain, in order."""
    steps: list[str] = []
    sync_wal, append_all = store._sync_wal, chain.append_all

    def synced() -> None:
        steps.append("synced")
        sync_wal()

    def appended(items, **options):  # type: ignore[no-untyped-def]
        steps.append("appended")
        return append_all(items, **options)

    monkeypatch.setattr(store, "_sync_wal", synced)
    monkeypatch.setattr(chain, "append_all", appended)
    return steps


async def test_a_record_reaches_the_chain_only_once_its_journal_row_is_on_disk(
        tmp_path: Path, path: Path, owner: Identity, monkeypatch: pytest.MonkeyPatch) -> None:
    """A crash of the machine then cannot leave the chain a record whose commit the store lost
    (docs/performance.md, "Durability": a provider's update is applied before it is synced)."""
    async with open_store(tmp_path / "anet.db") as store:
        chain = EvidenceChain(path, owner, journal=store)
        await chain.record_all([("task.accepted", {"n": 0})])  # a new chain's first: synced
        steps = syncs_and_appends(store, chain, monkeypatch)
        chain.record_later("task.finished", {"n": 1})  # nobody flushed the store since
        await eventually(lambda: "appended" in steps)
        assert steps == ["synced", "appended"]
        await chain.close()


async def test_an_append_whose_journal_rows_are_on_disk_does_not_sync_later_commits(
        tmp_path: Path, path: Path, owner: Identity, monkeypatch: pytest.MonkeyPatch) -> None:
    """A change's records are on disk with its own flush; a commit after it (the outbox entry
    the hub took, which nothing syncs at once) is not the append's to wait for."""
    async with open_store(tmp_path / "anet.db") as store:
        chain = EvidenceChain(path, owner, journal=store)
        await chain.record_all([("task.accepted", {"n": 0})])  # a new chain's first: synced
        chain.record_later("task.finished", {"n": 1})
        await store.flush()  # the change's own flush, as the task layer's
        with store.transaction(durable=False):
            store.trust("a" * 32)  # committed after it, not synced
        steps = syncs_and_appends(store, chain, monkeypatch)
        await eventually(lambda: "appended" in steps)
        assert steps == ["appended"]
        await chain.close()
    assert verify(path, owner.verified_history).records == 2


@pytest.mark.parametrize("lost", ["nothing", "the unsynced tail", "a torn last line"])
async def test_recover_appends_what_a_crash_took_from_the_chain_once(
        tmp_path: Path, path: Path, owner: Identity, lost: str) -> None:
    """The daemon is killed (nothing lost: every record is both in the chain and the journal) or
    the machine goes down (the chain loses what was written since its last sync, possibly in
    the middle of a line): the restarted node's chain holds every record exactly once."""
    async with open_store(tmp_path / "anet.db") as store:
        chain = EvidenceChain(path, owner, journal=store)
        await chain.record_all([("task.accepted", {"n": 0})])
        synced = path.stat().st_size
        await chain.record_all([("task.accepted", {"n": n}) for n in range(1, 4)])
        await chain.record_all([("task.answered", {"n": n}) for n in range(4, 6)])
        if lost != "nothing":
            cut = synced if lost == "the unsynced tail" else path.stat().st_size - 7
            with path.open("r+b") as chain_file:
                chain_file.truncate(cut)
        restarted = EvidenceChain(path, owner, journal=store)
        # A torn last line takes its append with it: the record before it, unsigned, was
        # vouched for by nothing else.
        assert restarted.recover() == {"nothing": 0, "the unsynced tail": 5,
                                       "a torn last line": 2}[lost]
        assert store.journaled_evidence() == []
        assert restarted.recover() == 0
    report = verify(path, owner.verified_history)
    assert report.ok, report.issues
    records = [json.loads(line) for line in lines(path)]
    assert [record["data"]["n"] for record in records] == [0, 1, 2, 3, 4, 5]
    assert [record["kind"] for record in records[4:]] == ["task.answered"] * 2


async def test_a_record_the_journal_cannot_keep_is_synced_by_its_append(
        tmp_path: Path, path: Path, owner: Identity) -> None:
    async with open_store(tmp_path / "anet.db") as store:
        chain = EvidenceChain(path, owner, journal=store)
        await chain.record_all([("task.accepted", {"n": 0})])

        def refuse(records: object) -> object:
            raise sqlite3.OperationalError("database or disk is full")

        store.journal_evidence = refuse  # type: ignore[assignment,method-assign]
        await chain.record_all([("task.accepted", {"n": 1})])
        assert not chain._unsynced  # the append waited for the disk, as without a journal
        await chain.close()
    assert verify(path, owner.verified_history).records == 2


async def test_a_chain_that_refuses_appends_leaves_the_journal_to_the_next_start(
        tmp_path: Path, path: Path, owner: Identity) -> None:
    async with open_store(tmp_path / "anet.db") as store:
        chain = EvidenceChain(path, owner, journal=store)
        await chain.record_all([("task.accepted", {"n": n}) for n in range(3)])
        await chain.close()
        await chain.record_all([("task.accepted", {"n": 3})])  # then the machine went down
        kept = store.journaled_evidence()
        rewrite(path, lambda chain_lines: chain_lines[:2])  # and the chain lost more than that
        restarted = EvidenceChain(path, owner, journal=store)
        assert restarted.recover() == 0  # the chain is shorter than its head: nothing appended
        assert store.journaled_evidence() == kept  # nothing forgotten either
