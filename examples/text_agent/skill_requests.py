"""What a message asks for: the skill, its options, and the text to work on.

A message names its skill in metadata (``{"skill": "summarize", "sentences": 2}``) or with a
leading command (``summarize 2: <text>``, ``transform slug: <text>``, ``stats: <text>``). A
message that is only a command (``summarize``) names the skill and leaves the text for the next
turn. Plain text gets the default skill, ``stats``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any

from examples.text_agent.analysis import TRANSFORM_MODES, Result, normalize_mode, stats
from examples.text_agent.analysis import summarize as summarize_text
from examples.text_agent.analysis import transform as transform_text

SKILLS = ("stats", "summarize", "transform")
DEFAULT_SKILL = "stats"
DEFAULT_SUMMARY_SENTENCES = 3
MAX_SUMMARY_SENTENCES = 50
SKILL_ALIASES = {"summarise": "summarize"}

# "<skill> [argument]: text", or the command alone; the argument is a number or a mode name.
COMMAND = re.compile(
    r"\A\s*(?P<skill>[A-Za-z]+)(?:[ \t]+(?P<argument>[\w -]*?))?[ \t]*(?::(?P<text>.*)|\Z)",
    re.DOTALL)


class RequestError(ValueError):
    """A request the agent cannot act on; the message is written for the person who sent it."""


@dataclass(frozen=True)
class SkillRequest:
    """One turn's request. Unset fields (None) are taken from earlier turns of the same task."""

    skill: str | None = None
    text: str = ""
    sentences: int | None = None
    mode: str | None = None

    def continuing(self, earlier: SkillRequest) -> SkillRequest:
        """This turn's request, completed with what an earlier turn of the task asked for."""
        sentences = self.sentences if self.sentences is not None else earlier.sentences
        return replace(self, skill=self.skill or earlier.skill, sentences=sentences,
                       mode=self.mode or earlier.mode)

    @property
    def effective_skill(self) -> str:
        return self.skill or DEFAULT_SKILL

    def options(self) -> dict[str, Any]:
        """The skill and options as metadata that ``parse_request`` reads back."""
        options: dict[str, Any] = {"skill": self.effective_skill}
        if self.sentences is not None:
            options["sentences"] = self.sentences
        if self.mode is not None:
            options["mode"] = self.mode
        return options


def parse_request(text: str, metadata: Mapping[str, Any]) -> SkillRequest:
    """The request in one message; RequestError when it names an unknown skill or bad option."""
    sentences = _sentence_count(metadata.get("sentences"))
    mode = _mode(metadata.get("mode"))
    if "skill" in metadata:
        return SkillRequest(skill=_skill(metadata["skill"]), text=text, sentences=sentences,
                            mode=mode)
    command = _command(text)
    if command is None:
        return SkillRequest(text=text, sentences=sentences, mode=mode)
    skill, argument, rest = command
    if argument and skill == "summarize":
        sentences = _sentence_count(argument)
    elif argument:
        mode = _mode(argument)
    return SkillRequest(skill=skill, text=rest, sentences=sentences, mode=mode)


def _command(text: str) -> tuple[str, str, str] | None:
    """(skill, argument, text) when the message starts with a command, else None.

    Only a skill name with a valid argument or none counts, so that ordinary prose such as
    "Stats show that: ..." or "transform the way we work" stays plain text.
    """
    match = COMMAND.match(text)
    if match is None:
        return None
    word = match["skill"].lower()
    skill = SKILL_ALIASES.get(word, word)
    if skill not in SKILLS:
        return None
    argument = (match["argument"] or "").strip()
    if argument and not _valid_argument(skill, argument):
        return None
    return skill, argument, (match["text"] or "").strip()


def _valid_argument(skill: str, argument: str) -> bool:
    if skill == "summarize":
        return argument.isdigit()
    return skill == "transform" and normalize_mode(argument) in TRANSFORM_MODES


def _skill(value: Any) -> str:
    name = str(value).strip().lower()
    skill = SKILL_ALIASES.get(name, name)
    if skill not in SKILLS:
        raise RequestError(f"unknown skill {value!r}; this agent offers: {', '.join(SKILLS)}")
    return skill


def _sentence_count(value: Any) -> int | None:
    if value is None:
        return None
    # Metadata numbers arrive as floats (protobuf Struct), commands as strings.
    try:
        count = float(value)
    except (TypeError, ValueError):
        count = float("nan")
    if not count.is_integer() or not 1 <= count <= MAX_SUMMARY_SENTENCES:
        raise RequestError(f"sentences must be a whole number from 1 to "
                           f"{MAX_SUMMARY_SENTENCES}, got {value!r}")
    return int(count)


def _mode(value: Any) -> str | None:
    if value is None:
        return None
    mode = normalize_mode(str(value))
    if mode not in TRANSFORM_MODES:
        raise RequestError(f"unknown transform mode {value!r}; use one of: "
                           + ", ".join(TRANSFORM_MODES))
    return mode


def validate(request: SkillRequest) -> None:
    """RequestError when the skill lacks an option it cannot do without."""
    if request.effective_skill == "transform" and request.mode is None:
        raise RequestError("transform needs a mode: write 'transform upper: <text>' or send "
                           "metadata {\"skill\": \"transform\", \"mode\": \"upper\"}; modes: "
                           + ", ".join(TRANSFORM_MODES))


def run_skill(request: SkillRequest) -> Result:
    """Do what a request that passed ``validate`` asks."""
    skill = request.effective_skill
    if skill == "summarize":
        return summarize_text(request.text, request.sentences or DEFAULT_SUMMARY_SENTENCES)
    if skill == "transform":
        return transform_text(request.text, request.mode or "")
    return stats(request.text)
