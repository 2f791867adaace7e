"""An emergency key rotation replaces the A2A token at once, running or not, and says so."""

from __future__ import annotations

import urllib.error
import urllib.request
from pathlib import Path

import pytest

pytest.importorskip("anet_a2a")

from anet_a2a.state import StateDir


def status_with(state: StateDir, token: str) -> int:
    address = state.address_file.read_text().strip()
    request = urllib.request.Request(f"http://{address}/a2a/v1/agents",
                                     headers={"Authorization": f"Bearer {token}"})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def test_emergency_rotation_of_a_running_node(anet, data_dir: Path) -> None:
    anet("init", check=True)
    anet("up", check=True)
    state = StateDir(data_dir / "modules" / "a2a")
    old = state.token().current()
    assert status_with(state, old) != 401
    plain = anet("keys", "rotate", check=True).stdout
    assert "a2a" not in plain and state.token().current() == old  # a normal one keeps it
    out = anet("keys", "rotate", "--emergency", check=True).stdout
    assert "a2a: replaced" in out and str(state.token_file) in out
    new = state.token().current()
    assert new != old
    assert status_with(state, old) == 401
    assert status_with(state, new) != 401
    anet("stop", check=True)
    anet("up", check=True)  # the next start does not replace it a second time
    assert state.token().current() == new


def test_emergency_rotation_of_a_stopped_node(anet, data_dir: Path) -> None:
    anet("init", check=True)
    anet("up", check=True)
    anet("stop", check=True)
    state = StateDir(data_dir / "modules" / "a2a")
    old = state.token().current()
    out = anet("keys", "rotate", "--emergency", check=True).stdout
    assert "a2a: replaced" in out and state.token().current() != old


pytestmark = pytest.mark.timeout(120)
