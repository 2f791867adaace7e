"""The hook that lets a module act on a key rotation at once."""

from __future__ import annotations

from pathlib import Path

from anet_core import hookimpl
from anet_core.identity import Identity
from anet_core.plugins import make_plugins
from anet_core.records import KeyRotationStep
from anet_core.settings import DataPaths


def test_hook_anet_key_rotated(tmp_path: Path) -> None:
    seen: list[bool] = []

    class Greeter:
        @hookimpl
        def anet_key_rotated(self, paths, identity):
            def run(emergency):
                seen.append(emergency)
                return f"greeter: {identity.key_seq}" if emergency else None
            return [KeyRotationStep(module="greeter", run=run)]

    class Broken:
        @hookimpl
        def anet_key_rotated(self):
            def run(emergency):
                raise RuntimeError("no disk")
            return [KeyRotationStep(module="broken", run=run)]

    plugins = make_plugins(load_entry_points=False)
    plugins.pm.register(Greeter(), name="greeter")
    plugins.pm.register(Broken(), name="broken")
    identity = Identity.create(tmp_path / "identity")
    identity.rotate(emergency=True)
    notes = sorted(plugins.after_key_rotation(DataPaths(tmp_path), identity, True))
    assert notes[1] == "greeter: 1" and "broken" in notes[0] and "no disk" in notes[0]
    assert plugins.after_key_rotation(DataPaths(tmp_path), identity, False) == [
        "broken: its follow-up to the rotation failed (RuntimeError: no disk); see the log"]
    assert seen == [True, False]
