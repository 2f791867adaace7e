"""docs/mcp.md defines the task metadata keys once, with every value the code can set."""

from __future__ import annotations

import re
from pathlib import Path

from anet_core.protocol.tasks import EffectStatus, Reason, TaskMetadata

DOCS = Path(__file__).resolve().parents[2] / "docs"
SECTION = (DOCS / "mcp.md").read_text(encoding="utf-8").split("\n## Task metadata\n", 1)[1]


def first_column(table: str) -> set[str]:
    return set(re.findall(r"^\| `([a-z_.]+)` \|", table, re.MULTILINE))


def table_after(label: str) -> set[str]:
    """The values in the first column of the table that follows the line ``label``."""
    return first_column(SECTION.split(f"\n{label}\n", 1)[1].strip().split("\n\n", 1)[0])


def test_every_key_is_defined_in_mcp_md_only() -> None:
    keys = first_column(SECTION.split("\n\n", 2)[1])
    assert {TaskMetadata.STATE_SEQ, TaskMetadata.RECEIPT_VERIFIED, TaskMetadata.REASON,
            TaskMetadata.EFFECT_STATUS, TaskMetadata.MESSAGE_REPLY} <= keys
    for other in DOCS.glob("*.md"):
        if other.name != "mcp.md":
            assert not re.search(r"^\| `anet\.reason` \|", other.read_text(), re.MULTILINE), other


def test_every_reason_and_effect_status_is_defined() -> None:
    assert table_after("`anet.reason`:") == {reason.value for reason in Reason}
    assert table_after("`anet.effect_status`:") == {effect.value for effect in EffectStatus}
