"""`anet agents wire hermes` finds Hermes's files as Hermes does, and wires remote agents only."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import pytest

from anet_a2a import cli, hermes
from anet_core.cli.context import CliContext
from anet_core.errors import AnetError
from tests.a2a.local import Local


@pytest.mark.parametrize(("profile", "env", "expected"), [
    (None, {"HOME": "/h"}, "/h/.hermes/config.yaml"),
    (None, {"HOME": "/h", "HERMES_HOME": "/x"}, "/x/config.yaml"),
    ("default", {"HOME": "/h"}, "/h/.hermes/config.yaml"),
    ("default", {"HOME": "/h", "HERMES_HOME": "/x"}, "/x/config.yaml"),
    ("work", {"HOME": "/h"}, "/h/.hermes/profiles/work/config.yaml"),
    ("work", {"HOME": "/h", "HERMES_HOME": "/x"}, "/x/profiles/work/config.yaml"),
    # HERMES_HOME naming a profile of the default home: profiles stay anchored there.
    ("work", {"HOME": "/h", "HERMES_HOME": "/h/.hermes/profiles/other"},
     "/h/.hermes/profiles/work/config.yaml"),
    ("default", {"HOME": "/h", "HERMES_HOME": "/h/.hermes/profiles/other"},
     "/h/.hermes/config.yaml"),
    ("w0_rk-2", {"HOME": "/h"}, "/h/.hermes/profiles/w0_rk-2/config.yaml"),
])
def test_profiles_are_where_hermes_looks(profile: str | None, env: dict[str, str],
                                          expected: str) -> None:
    assert hermes.config_path(profile, env) == Path(expected)


@pytest.mark.parametrize("profile", ["Work", "my.profile", "-x", "_x", "a" * 65, "", "..",
                                     "a/b"])
def test_names_hermes_would_refuse_are_refused(profile: str) -> None:
    with pytest.raises(AnetError, match="not a Hermes profile name"):
        hermes.config_path(profile, {"HOME": "/h"})


async def test_wire_refuses_the_node_itself_and_unknown_agents(local: Local, tmp_path: Path,
                                                              monkeypatch) -> None:
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.delenv("HERMES_HOME", raising=False)
    ctx = CliContext(settings=local.node.settings, plugins=local.node.plugins)

    def wire(aid: str) -> int:
        return cli.run_wire(argparse.Namespace(target="hermes", aids=[aid], profile=None,
                                               name=None, refresh=False), ctx)

    with pytest.raises(AnetError, match="this node itself"):
        await asyncio.to_thread(wire, local.node.aid)
    with pytest.raises(AnetError, match="no agent"):
        await asyncio.to_thread(wire, "b" * 32)
    config = tmp_path / "home" / ".hermes" / "config.yaml"
    assert not config.exists()
    assert await asyncio.to_thread(wire, local.remote.aid) == 0
    assert local.remote.aid in config.read_text()
