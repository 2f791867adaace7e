"""Wire Hermes to remote agents: ``a2a_agents`` entries in Hermes's config.yaml.

The file is edited round-trip (ruamel.yaml), so the user's other settings and comments stay;
it is backed up first, written atomically with mode 0600 (it holds the token), and read back
before it replaces the original, because Hermes silently falls back to defaults on a YAML error.
Which files anet wrote to is remembered in the module's state directory for ``--refresh``.
"""

from __future__ import annotations

import io
import json
import os
import re
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.comments import CommentedMap
from ruamel.yaml.error import YAMLError

from anet_a2a import AGENTS_PATH
from anet_core.api import AnetError, write_atomic, write_private

SECTION = "a2a_agents"
TIMEOUT_S = 330
"""Outlives a 300 s server window, as Hermes's A2A client needs (docs/a2a.md, "Hermes")."""
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]")
_OURS = re.compile(rf"\Ahttp://127\.0\.0\.1:\d+{re.escape(AGENTS_PATH)}/([a-z2-7]{{32}})\Z")


PROFILE_NAME = re.compile(r"\A[a-z0-9][a-z0-9_-]{0,63}\Z")
"""Hermes's own rule for profile names (hermes_cli/profiles.py)."""
DEFAULT_PROFILE = "default"


def default_home(env: dict[str, str]) -> Path:
    """Hermes's default home, where named profiles are anchored: ``$HERMES_HOME`` when it is
    set outside ``~/.hermes`` (a home of its own), else ``~/.hermes`` (also when
    ``$HERMES_HOME`` is a profile's directory inside it)."""
    native = Path(env.get("HOME", str(Path.home()))) / ".hermes"
    if env.get("HERMES_HOME"):
        chosen = Path(env["HERMES_HOME"]).expanduser()
        if chosen != native and native not in chosen.parents:
            return chosen
    return native


def config_path(profile: str | None, env: dict[str, str] | None = None) -> Path:
    """Hermes's config, as Hermes finds it: a named profile's (``default`` is the default
    home itself), else the active home's (``$HERMES_HOME``, else ``~/.hermes``)."""
    env = dict(os.environ if env is None else env)
    if profile is None:
        home = Path(env["HERMES_HOME"]).expanduser() if env.get("HERMES_HOME") else \
            default_home(env)
        return home / "config.yaml"
    if profile == DEFAULT_PROFILE:
        return default_home(env) / "config.yaml"
    if not PROFILE_NAME.match(profile):
        raise AnetError("hermes-profile-invalid",
                        f"{profile[:80]!r} is not a Hermes profile name",
                        hint="Hermes names profiles with lower-case letters, digits, _ and -, "
                             "starting with a letter or digit, at most 64 characters")
    return default_home(env) / "profiles" / profile / "config.yaml"


@dataclass(frozen=True)
class Wiring:
    """What one entry points at: the agent's URL on the local endpoint and the token."""

    address: str
    token: str

    def url(self, aid: str) -> str:
        return f"http://{self.address}{AGENTS_PATH}/{aid}"

    def entry(self, aid: str, capabilities: list[str]) -> CommentedMap:
        entry = CommentedMap()
        entry["url"] = self.url(aid)
        auth = CommentedMap(type="bearer", token=self.token)
        auth.fa.set_flow_style()
        entry["auth"] = auth
        entry["timeout"] = TIMEOUT_S
        if capabilities:
            entry["capabilities"] = capabilities
        return entry


def entry_name(aid: str, name: str | None) -> str:
    chosen = name or aid
    if not chosen or _UNSAFE.search(chosen):
        raise AnetError("hermes-name-invalid",
                        f"{chosen!r} cannot name an a2a_agents entry (letters, digits, _ . -)")
    return chosen


def _yaml() -> YAML:
    yaml = YAML()
    yaml.preserve_quotes = True
    yaml.indent(mapping=2, sequence=4, offset=2)
    return yaml


def _load(path: Path) -> CommentedMap:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return CommentedMap()
    try:
        document = _yaml().load(text)
    except YAMLError as error:
        raise AnetError("hermes-config-invalid", f"{path} is not valid YAML: {error}",
                        hint="fix it (Hermes ignores a file it cannot parse), then run again",
                        ) from None
    if document is None:
        return CommentedMap()
    if not isinstance(document, CommentedMap):
        raise AnetError("hermes-config-invalid",
                        f"{path}: the top level is a {type(document).__name__}, not a mapping")
    return document


def _save(path: Path, document: CommentedMap) -> None:
    out = io.StringIO()
    _yaml().dump(document, out)
    text = out.getvalue()
    _yaml().load(text)  # what Hermes will read must parse; raises before anything is replaced
    if path.exists():
        backup = path.with_name(path.name + ".anet-backup")
        shutil.copyfile(path, backup)
        os.chmod(backup, 0o600)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_private(path, text)


def wire(path: Path, name: str, aid: str, wiring: Wiring, capabilities: list[str]) -> None:
    """Write (or replace) the entry ``a2a_agents.<name>``; everything else stays as it was."""
    document = _load(path)
    section = document.get(SECTION)
    if section is None:
        section = document[SECTION] = CommentedMap()
    elif not isinstance(section, CommentedMap):
        raise AnetError("hermes-config-invalid",
                        f"{path}: {SECTION} is a {type(section).__name__}, not a mapping",
                        hint=f"make {SECTION} a mapping of names to agents")
    section[name] = wiring.entry(aid, capabilities)
    _save(path, document)


def refresh(path: Path, wiring: Wiring) -> list[str]:
    """Point every entry anet wrote in ``path`` at the current address and token; their names."""
    document = _load(path)
    section = document.get(SECTION)
    if not isinstance(section, CommentedMap):
        return []
    refreshed = []
    for name, entry in section.items():
        match = _OURS.match(str(entry.get("url", ""))) if isinstance(entry, CommentedMap) else None
        if match is None:
            continue
        entry["url"] = wiring.url(match.group(1))
        auth = CommentedMap(type="bearer", token=wiring.token)
        auth.fa.set_flow_style()
        entry["auth"] = auth
        refreshed.append(str(name))
    if refreshed:
        _save(path, document)
    return refreshed


@dataclass(frozen=True)
class WiredFiles:
    """The Hermes config files anet wrote entries to (``hermes_wired.json`` in the state dir)."""

    record: Path

    def paths(self) -> list[Path]:
        try:
            return [Path(item) for item in json.loads(self.record.read_text(encoding="utf-8"))]
        except (FileNotFoundError, ValueError):
            return []

    def add(self, path: Path) -> None:
        paths = {str(item) for item in self.paths()} | {str(path)}
        write_atomic(self.record, (json.dumps(sorted(paths), indent=2) + "\n").encode())


def capabilities_of(card: dict[str, Any]) -> list[str]:
    """Skill ids and tags of a proxy card, for Hermes's a2a_orchestrate matching."""
    seen: dict[str, None] = {}
    for skill in card.get("skills", []):
        for word in [skill.get("id", ""), *skill.get("tags", [])]:
            if word:
                seen[word] = None
    return list(seen)
