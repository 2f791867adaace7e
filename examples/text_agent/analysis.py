"""Text analysis without a model: counts, an extractive summary, and line/case transforms.

Pure functions over strings; nothing here knows about A2A. Each result carries a human reply and
a JSON-ready dict of the numbers (camelCase keys, like every other A2A payload).
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

# Average silent reading speed of adults for non-fiction (Brysbaert, 2019).
WORDS_PER_MINUTE = 238
TOP_WORDS = 10

# Letters and digits, with inner apostrophes kept, straight or typographic (U+2019): "don't".
WORD = re.compile(r"[^\W_]+(?:['\u2019][^\W_]+)*")
# A sentence ends at . ! ? or … followed by whitespace, or at a blank line. Abbreviations such as
# "e.g." split too: good enough for an example that has no language model.
SENTENCE_END = re.compile(r"(?<=[.!?…])[\"')\]]*\s+|\n\s*\n")
PARAGRAPH_BREAK = re.compile(r"\n\s*\n")

STOPWORDS = frozenset("""
a about above after again against all am an and any are as at be because been before being below
between both but by can could did do does doing down during each few for from further had has have
having he her here hers herself him himself his how i if in into is it its itself just me more most
my myself no nor not now of off on once only or other our ours ourselves out over own same she
should so some such than that the their theirs them themselves then there these they this those
through to too under until up very was we were what when where which while who whom why will with
would you your yours yourself yourselves also may might must shall us via per
""".split())


@dataclass(frozen=True)
class Result:
    """What a skill produced: the reply for a person and the numbers for a program."""

    reply: str
    data: dict[str, Any]


def words_of(text: str) -> list[str]:
    return WORD.findall(text)


def sentences_of(text: str) -> list[str]:
    return [s.strip() for s in SENTENCE_END.split(text) if s and s.strip()]


def content_words(text: str) -> list[str]:
    """Lower-cased words that carry meaning: no stopwords, no bare numbers."""
    return [w for w in (word.lower() for word in words_of(text))
            if w not in STOPWORDS and not w.isdigit()]


def stats(text: str) -> Result:
    words = words_of(text)
    sentences = sentences_of(text)
    paragraphs = [p for p in PARAGRAPH_BREAK.split(text) if p.strip()]
    top = Counter(content_words(text)).most_common(TOP_WORDS)
    reading_seconds = math.ceil(len(words) * 60 / WORDS_PER_MINUTE)
    data: dict[str, Any] = {
        "characters": len(text),
        "charactersNoSpaces": sum(1 for ch in text if not ch.isspace()),
        "words": len(words),
        "sentences": len(sentences),
        "paragraphs": len(paragraphs),
        "lines": len(text.splitlines()),
        "averageWordLength": round(sum(map(len, words)) / len(words), 2) if words else 0,
        "averageSentenceWords": round(len(words) / len(sentences), 2) if sentences else 0,
        "readingTimeSeconds": reading_seconds,
        "topWords": [{"word": word, "count": count} for word, count in top],
    }
    top_list = ", ".join(f"{word} ({count})" for word, count in top[:5]) or "none"
    reply = (f"{data['words']} words, {data['sentences']} sentences, {data['paragraphs']} "
             f"paragraphs, {data['characters']} characters; about {_duration(reading_seconds)} "
             f"to read. Top words: {top_list}.")
    return Result(reply=reply, data=data)


def summarize(text: str, sentence_count: int) -> Result:
    """The ``sentence_count`` sentences whose words are most frequent in the text, in text order.

    A sentence scores the mean relative frequency of its content words, so long sentences do not
    win by length alone; ties go to the earlier sentence.
    """
    sentences = sentences_of(text)
    frequencies = Counter(content_words(text))
    highest = max(frequencies.values(), default=1)

    def score(sentence: str) -> float:
        words = content_words(sentence)
        return sum(frequencies[w] / highest for w in words) / len(words) if words else 0.0

    scores = [score(s) for s in sentences]
    ranked = sorted(range(len(sentences)), key=lambda i: (-scores[i], i))
    chosen = sorted(ranked[:sentence_count])
    summary = " ".join(sentences[i] for i in chosen)
    data = {
        "sentences": len(chosen),
        "ofSentences": len(sentences),
        "chosenIndices": chosen,
        "scores": [round(scores[i], 4) for i in chosen],
        "compression": round(len(summary) / len(text), 4) if text else 0,
    }
    return Result(reply=summary, data=data)


def _slug(text: str) -> str:
    ascii_text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode()
    return re.sub(r"[^a-z0-9]+", "-", ascii_text.lower()).strip("-")


def _dedupe(lines: list[str]) -> list[str]:
    return list(dict.fromkeys(lines))  # keeps the first occurrence, in order


WHOLE_TEXT_TRANSFORMS: dict[str, Callable[[str], str]] = {
    "upper": str.upper,
    "lower": str.lower,
    "title": str.title,
    "slug": _slug,
}
LINE_TRANSFORMS: dict[str, Callable[[list[str]], list[str]]] = {
    "reverse-lines": lambda lines: lines[::-1],
    "sort-lines": lambda lines: sorted(lines, key=str.casefold),
    "dedupe-lines": _dedupe,
}
TRANSFORM_MODES = (*WHOLE_TEXT_TRANSFORMS, *LINE_TRANSFORMS)


def normalize_mode(mode: str) -> str:
    """``"Sort lines"`` and ``"sort_lines"`` both mean ``"sort-lines"``."""
    return re.sub(r"[\s_]+", "-", mode.strip().lower())


def transform(text: str, mode: str) -> Result:
    """Apply one of TRANSFORM_MODES; a ValueError names the modes when ``mode`` is unknown."""
    mode = normalize_mode(mode)
    lines_in = text.splitlines()
    if mode in WHOLE_TEXT_TRANSFORMS:
        output = WHOLE_TEXT_TRANSFORMS[mode](text)
        lines_out = output.splitlines()
    elif mode in LINE_TRANSFORMS:
        lines_out = LINE_TRANSFORMS[mode](lines_in)
        output = "\n".join(lines_out)
    else:
        raise ValueError(f"unknown transform mode {mode!r}; use one of: "
                         + ", ".join(TRANSFORM_MODES))
    data = {"mode": mode, "linesIn": len(lines_in), "linesOut": len(lines_out),
            "charactersIn": len(text), "charactersOut": len(output)}
    return Result(reply=output, data=data)


def _duration(seconds: int) -> str:
    if seconds < 60:
        return f"{seconds} s"
    minutes, rest = divmod(seconds, 60)
    return f"{minutes} min {rest} s" if rest else f"{minutes} min"
