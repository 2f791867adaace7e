"""docs/a2a.md tells a Hermes user what Hermes itself does and does not do."""

from __future__ import annotations

from pathlib import Path

import pytest

HERMES = (Path(__file__).parents[2] / "docs" / "a2a.md").read_text().split("## Hermes", 1)[1] \
    .split("\n## ", 1)[0]


@pytest.mark.parametrize("fact", [
    "0.20",  # the first Hermes with A2A
    "0.19.0",  # the PyPI release without it
    "hermes tools enable a2a` fails",
    "a2a_discover",  # sends no token
    "sends no token",
    "a2a_call",  # what to use instead
    "never sends a `taskId`",
    "new task in the same context",
])
def test_the_hermes_section_says(fact: str) -> None:
    assert fact in HERMES
