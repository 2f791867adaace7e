"""The parts of publishing on their own: the advertised base URL, the token file, the rate
limit, and how aliases resolve against the skills their backends offer."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from anet_a2a.config import PublishConfig
from anet_a2a.publish.aliases import Aliases
from anet_a2a.publish.cards import published_base
from anet_a2a.publish.surface import RateLimit
from anet_a2a.publish.tokens import PublishTokens
from anet_core.api import AnetError, SkillSource


def test_the_public_base_url_comes_first_then_the_overrides_then_the_listener() -> None:
    assert published_base("https://agents.example.com", "ignored", 1, "127.0.0.1",
                          43810) == "https://agents.example.com"
    assert published_base("", None, None, "127.0.0.1", 43810) == "http://127.0.0.1:43810"
    assert published_base("", "agents.lan", None, "127.0.0.1", 43810) == \
        "http://agents.lan:43810"
    assert published_base("", None, 9000, "127.0.0.1", 43810) == "http://127.0.0.1:9000"
    assert published_base("", "0.0.0.0", 9000, "127.0.0.1", 1) == "http://0.0.0.0:9000"
    assert published_base("", None, None, "::1", 5) == "http://[::1]:5"


def test_the_public_base_url_is_checked() -> None:
    assert PublishConfig(public_base_url="https://a.example/x/").public_base_url == \
        "https://a.example/x"
    with pytest.raises(ValueError):
        PublishConfig(public_base_url="https://user@a.example")


def test_tokens_keep_only_hashes_and_revocation_and_rotation_take_effect(tmp_path: Path) -> None:
    path = tmp_path / "publish_tokens.json"
    writer, reader = PublishTokens(path), PublishTokens(path)
    alice = writer.add("alice", [])
    bob = writer.add("bob", ["desk"])
    assert alice not in path.read_text() and bob not in path.read_text()
    assert os.stat(path).st_mode & 0o077 == 0
    assert reader.match(alice).name == "alice"
    assert reader.match(bob).reaches("desk") and not reader.match(bob).reaches("triage")
    assert reader.match("") is None and reader.match(alice + "x") is None
    with pytest.raises(AnetError):
        writer.add("alice", [])
    writer.revoke("bob")
    assert reader.match(bob) is None
    new = writer.rotate("alice")
    assert reader.match(alice) is None and reader.match(new).name == "alice"
    with pytest.raises(AnetError):
        writer.revoke("nobody")


def test_the_rate_limit_counts_per_token_in_a_sliding_minute() -> None:
    limit = RateLimit(2)
    assert limit.wait("a", now=0) == 0 and limit.wait("a", now=1) == 0
    assert limit.wait("a", now=2) == pytest.approx(58)
    assert limit.wait("b", now=2) == 0
    assert limit.wait("a", now=60.5) == 0


class FakeNode:
    """What Aliases asks of the node: the modules' skill sources."""

    def __init__(self, sources: list[SkillSource]) -> None:
        self.plugins = self
        self._sources = sources

    def collect(self, hook: str, **kwargs: Any) -> list[SkillSource]:
        assert hook == "anet_card_skills"
        return self._sources


def source(backend: str, skills: list[str]) -> SkillSource:
    async def read() -> list[dict[str, Any]]:
        return [{"id": skill, "name": skill, "tags": ["t"]} for skill in skills]

    return SkillSource(module="backends", read=read, backend=backend)


async def test_aliases_expose_only_named_skills_their_backend_offers() -> None:
    config = PublishConfig.model_validate({"enabled": True, "aliases": {
        "a": {"published": True, "skills": ["x", "missing"]},
        "b": {"published": True, "backend": "y", "skills": ["y"]},
        "c": {"published": True, "backend": "nowhere"},
        "d": {"published": True, "backend": "empty", "skills": ["x"]},
        "e": {"skills": ["x"]},
        "f": {"published": True, "enabled": False},
        "g": {"published": True, "backend": "nowhere", "serve": "inbox"},
    }})
    node = FakeNode([source("*", ["x", "z"]), source("y", ["y"]), source("empty", [])])
    state = await Aliases(node, config).state()  # type: ignore[arg-type]
    assert sorted(state.published) == ["a", "b", "d", "g"]
    assert [skill["id"] for skill in state.published["a"].skills] == ["x"]
    assert state.published["b"].skill == "y" and state.published["a"].skill is None
    assert not state.published["g"].offer
    problems = "\n".join(state.problems)
    assert "aliases.a.skills: 'missing' is not a skill of backend '*'" in problems
    assert "aliases.c.backend 'nowhere' names no configured backend" in problems
    assert "aliases.d.skills names 1 skill(s) but its backend 'empty' offers none" in problems
    disabled = PublishConfig.model_validate({"aliases": {"a": {"published": True}}})
    assert (await Aliases(node, disabled).state()).published == {}  # type: ignore[arg-type]
