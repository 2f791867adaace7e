"""The agent card of the text agent: who it is, where it listens, its three skills."""

from __future__ import annotations

from a2a.types import AgentCapabilities, AgentCard, AgentSkill

from examples.agent_server import declare_bearer_auth, interfaces_for
from examples.text_agent.analysis import TRANSFORM_MODES

AGENT_NAME = "Text Agent"
AGENT_VERSION = "1.0.0"
TEXT = "text/plain"
JSON = "application/json"

SKILLS = [
    AgentSkill(
        id="stats", name="Text statistics",
        description=("Counts characters, words, sentences, paragraphs and lines, estimates the "
                     "reading time and lists the most frequent words (the default skill)."),
        tags=["text", "statistics", "count", "reading-time"],
        examples=["stats: The quick brown fox jumps over the lazy dog.",
                  "How long does this take to read?"],
        input_modes=[TEXT], output_modes=[TEXT, JSON]),
    AgentSkill(
        id="summarize", name="Extractive summary",
        description=("Picks the N sentences (3 by default) whose words are most frequent in the "
                     "text and returns them in their original order. No model, no paraphrase."),
        tags=["text", "summary", "extractive"],
        examples=["summarize: <a few paragraphs>", "summarize 2: <an article>"],
        input_modes=[TEXT], output_modes=[TEXT, JSON]),
    AgentSkill(
        id="transform", name="Text transform",
        description=("Rewrites the text with one mode: " + ", ".join(TRANSFORM_MODES) + "."),
        tags=["text", "transform", "case", "slug", "lines"],
        examples=["transform upper: make this loud", "transform slug: Hello, World!",
                  "transform sort-lines: <one item per line>"],
        input_modes=[TEXT], output_modes=[TEXT, JSON]),
]


def build_card(base_url: str, requires_token: bool) -> AgentCard:
    card = AgentCard(
        name=AGENT_NAME,
        description=("Counts, summarises and transforms text without any model. Name the skill "
                     "in message metadata ('skill') or start the text with it ('summarize: ...')."),
        version=AGENT_VERSION,
        supported_interfaces=interfaces_for(base_url),
        capabilities=AgentCapabilities(streaming=True, push_notifications=False,
                                       extended_agent_card=False),
        default_input_modes=[TEXT],
        default_output_modes=[TEXT, JSON],
        skills=SKILLS,
    )
    if requires_token:
        declare_bearer_auth(card)
    return card
