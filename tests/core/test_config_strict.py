"""Configuration booleans are booleans, and an error names the block the key was written in."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from anet_core.config import load_config
from anet_core.errors import AnetError
from anet_core.plugins import make_plugins


@pytest.fixture(scope="module")
def plugins():
    return make_plugins()


def refusal(tmp_path: Path, plugins, raw: dict) -> str:
    path = tmp_path / "config.json"
    path.write_text(json.dumps(raw))
    with pytest.raises(AnetError) as caught:
        load_config(path, plugins)
    return caught.value.message


@pytest.mark.parametrize("value", ["yes", "true", "false", 1, 0, "on"])
@pytest.mark.parametrize("key", ["toolless", "accept_untrusted", "allow_tcp"])
def test_booleans_are_strict(tmp_path: Path, plugins, key: str, value: object) -> None:
    backend = {"match": "*", "url": "unix:///run/agent.sock", key: value}
    message = refusal(tmp_path, plugins, {"modules": {"backends": {"backends": [backend]}}})
    assert f"modules.backends.backends[0].{key}" in message and "boolean" in message


@pytest.mark.parametrize(("block", "where"), [
    ({"backends": [{"match": "*", "url": "unix:///a.sock", "toolless": "yes"}]},
     "modules.a2a.backends[0].toolless"),
    ({"backends": [{"match": "*", "url": "http://127.0.0.1:9"}]}, "modules.a2a.backends[0]"),
    ({"retry": {"give_up_after": "soon"}}, "modules.a2a.retry.give_up_after"),
])
def test_an_error_under_modules_a2a_names_modules_a2a(tmp_path: Path, plugins, block: dict,
                                                      where: str) -> None:
    message = refusal(tmp_path, plugins, {"modules": {"a2a": block}})
    assert f"{where}:" in message and "modules.backends" not in message
