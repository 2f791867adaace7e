"""`anet evidence list` and `show` read the chain as the operator needs it, in the terminal and
as JSON, and say which records do not verify."""

from __future__ import annotations

import json
from pathlib import Path

from anet_core.evidence import EvidenceChain
from anet_core.identity import Identity
from anet_core.settings import DataPaths


def fill(data_dir: Path) -> None:
    paths = DataPaths(data_dir)
    chain = EvidenceChain(paths.evidence_chain, Identity.load(paths.identity))
    chain.append("task.forwarded", {"taskId": "t-one", "peer": "p" * 32})
    chain.append("backends.failed", {"taskId": "t-two", "reason": "unreachable"})
    chain.append("task.finished", {"taskId": "t-one", "state": "TASK_STATE_COMPLETED"})


def test_list_filters_and_json(anet, data_dir: Path) -> None:
    anet("init", check=True)
    assert "empty" in anet("evidence", "list", check=True).stdout
    fill(data_dir)
    out = anet("evidence", "list", check=True).stdout
    assert [line.split()[0] for line in out.splitlines()[:3]] == ["0", "1", "2"]
    assert "task.forwarded" in out and "t-two" in out and "NOT VERIFIED" not in out
    one = anet("evidence", "list", "--task", "t-one", check=True).stdout
    assert "t-two" not in one and one.count("t-one") == 2
    family = json.loads(anet("evidence", "list", "--kind", "task.*", "--json", check=True).stdout)
    assert [record["kind"] for record in family] == ["task.forwarded", "task.finished"]
    assert all(record["verified"] for record in family)
    newest = json.loads(anet("evidence", "list", "--limit", "1", "--json", check=True).stdout)
    assert [record["seq"] for record in newest] == [2]
    assert "No record matches" in anet("evidence", "list", "--kind", "x.y", check=True).stdout
    assert anet("evidence", "list", "--limit", "0").returncode == 1


def test_show_a_record_and_a_changed_one(anet, data_dir: Path) -> None:
    anet("init", check=True)
    fill(data_dir)
    out = anet("evidence", "show", "1", check=True).stdout
    assert "backends.failed" in out and "unreachable" in out and "verified  yes" in out
    shown = json.loads(anet("evidence", "show", "1", "--json", check=True).stdout)
    assert shown["data"] == {"taskId": "t-two", "reason": "unreachable"} and shown["verified"]
    chain = DataPaths(data_dir).evidence_chain
    chain.write_text(chain.read_text().replace("unreachable", "reachable"))
    changed = anet("evidence", "show", "1", check=True).stdout
    assert "verified  NO: record seq 1 does not match its hash" in changed
    assert "NOT VERIFIED" in anet("evidence", "list", check=True).stdout
    missing = anet("evidence", "show", "9")
    assert missing.returncode == 1 and "no record seq 9" in missing.stderr


def test_show_names_the_record_whose_signature_vouches_for_a_record(anet, data_dir: Path) -> None:
    """An append signs its last record only; `show` says which one vouches for the others."""
    anet("init", check=True)
    paths = DataPaths(data_dir)
    chain = EvidenceChain(paths.evidence_chain, Identity.load(paths.identity))
    chain.append("task.forwarded", {"taskId": "t-one"})
    chain.append_all([("task.accepted", {"taskId": "t-two"}),
                      ("task.finished", {"taskId": "t-one"})])
    unsigned = anet("evidence", "show", "1", check=True).stdout
    assert "signed    by record seq 2" in unsigned and "signer    -" in unsigned
    assert "verified  yes" in unsigned
    signed = json.loads(anet("evidence", "show", "2", "--json", check=True).stdout)
    assert signed["signedIn"] == 2 and signed["verified"]
    assert signed["signer"] == Identity.load(paths.identity).aid
