"""config.json: module blocks, borrowed keys, and errors that name the file, key and fix."""

from __future__ import annotations

import json
from datetime import timedelta
from pathlib import Path

import pytest

from anet_core.config import load_config, read_raw, validate_config
from anet_core.errors import AnetError
from anet_core.plugins import make_plugins
from anet_core.util.durations import format_duration, parse_duration


@pytest.fixture(scope="module")
def plugins():
    return make_plugins()


def write(tmp_path: Path, content: str) -> Path:
    path = tmp_path / "config.json"
    path.write_text(content)
    return path


def test_invalid_json_names_the_file_line_and_problem(tmp_path: Path, plugins) -> None:
    path = write(tmp_path, '{"node": {"name": "x",}}')
    with pytest.raises(AnetError) as caught:
        load_config(path, plugins)
    assert str(path) in caught.value.message and "line 1" in caught.value.message


def test_a_wrong_type_names_the_key_path_and_the_value(tmp_path: Path, plugins) -> None:
    path = write(tmp_path, json.dumps({"modules": {"backends": {"retry": {"max_interval": 5}}}}))
    with pytest.raises(AnetError) as caught:
        load_config(path, plugins)
    assert "modules.backends.retry.max_interval" in caught.value.message
    assert "5" in caught.value.message and "\n" not in caught.value.message


def test_an_unknown_key_is_refused(tmp_path: Path, plugins) -> None:
    path = write(tmp_path, json.dumps({"modules": {"a2a": {"prot": 1}}}))
    with pytest.raises(AnetError, match=r"modules\.a2a\.prot: unknown key"):
        load_config(path, plugins)


def test_a_block_for_a_module_not_installed_names_the_install_command(tmp_path: Path) -> None:
    plugins = make_plugins(disabled={"x402"})
    path = write(tmp_path, json.dumps({"modules": {"x402": {}}}))
    with pytest.raises(AnetError) as caught:
        load_config(path, plugins)
    assert "x402 is not installed" in caught.value.message
    assert caught.value.hint == 'install it with: pip install "anet[x402]"'


def test_a_block_for_an_unknown_module_lists_the_installed_ones(tmp_path: Path, plugins) -> None:
    with pytest.raises(AnetError, match="no installed module is called 'nope'"):
        load_config(write(tmp_path, json.dumps({"modules": {"nope": {}}})), plugins)


BACKEND = {"match": "*", "url": "unix:///run/agent.sock"}


@pytest.mark.parametrize("disabled", [set(), {"a2a"}], ids=["with-a2a", "without-a2a"])
def test_backends_keys_in_the_a2a_block_reach_the_backends_module(tmp_path: Path,
                                                                  disabled) -> None:
    plugins = make_plugins(disabled=disabled)
    raw = {"modules": {"a2a": {"backends": [BACKEND], "retry": {"give_up_after": "0"}}}}
    config = load_config(write(tmp_path, json.dumps(raw)), plugins)
    block = config.module("backends")
    assert block.backends[0].url == BACKEND["url"]
    assert block.retry.give_up_after == timedelta(0)


def test_a_key_set_in_both_places_is_refused(tmp_path: Path, plugins) -> None:
    raw = {"modules": {"a2a": {"backends": [BACKEND]}, "backends": {"backends": [BACKEND]}}}
    with pytest.raises(AnetError, match="both in modules.a2a and in modules.backends"):
        load_config(write(tmp_path, json.dumps(raw)), plugins)


@pytest.mark.parametrize("backend, message", [
    ({"url": "unix:///s"}, r"backends\[0\]\.match: Field required"),
    ({"match": "*", "url": "http://127.0.0.1:9"}, "set allow_tcp: true"),
    ({"match": "*", "url": "unix:///s", "accept_untrusted": True}, "needs toolless: true"),
])
def test_backend_validation_names_the_backend_and_key(tmp_path: Path, plugins, backend,
                                                      message) -> None:
    raw = {"modules": {"backends": {"backends": [backend]}}}
    with pytest.raises(AnetError, match=message):
        load_config(write(tmp_path, json.dumps(raw)), plugins)


def test_a_second_backend_with_the_same_match_is_refused(tmp_path: Path, plugins) -> None:
    raw = {"modules": {"backends": {"backends": [BACKEND, BACKEND]}}}
    with pytest.raises(AnetError,
                       match=r"backends\[1\]\.match '\*' is already used by backends\[0\]"):
        load_config(write(tmp_path, json.dumps(raw)), plugins)


def test_a_missing_file_means_defaults(tmp_path: Path) -> None:
    assert read_raw(tmp_path / "absent.json") == {"node": {}, "modules": {}}
    config = validate_config(tmp_path / "absent.json", {}, [])
    assert config.node.no_response_after == timedelta(minutes=15)
    assert config.hub.heartbeat == timedelta(seconds=10)


@pytest.mark.parametrize("heartbeat", ["0s", "500ms", "6m"])
def test_a_heartbeat_out_of_range_is_refused_naming_the_range(tmp_path: Path,
                                                              heartbeat: str) -> None:
    raw = {"hub": {"heartbeat": heartbeat}}
    with pytest.raises(AnetError, match=r"hub\.heartbeat .*from 1s to 5m"):
        validate_config(write(tmp_path, json.dumps(raw)), raw, [])


@pytest.mark.parametrize("text, seconds", [("0", 0), ("2m", 120), ("1h30m", 5400),
                                           ("1.5s", 1.5), ("300ms", 0.3), ("10m0s", 600)])
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_duration(text).total_seconds() == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "5", "2 m", "-1s", "m", "1d", "1h 30m"])
def test_bad_go_durations_are_refused_with_an_example(text: str) -> None:
    with pytest.raises(ValueError, match="for example"):
        parse_duration(text)


def test_durations_format_back() -> None:
    assert format_duration(parse_duration("1h30m")) == "1h30m"
    assert format_duration(parse_duration("90s")) == "1m30s"
