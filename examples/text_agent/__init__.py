"""An A2A 1.0 agent that counts, summarises and transforms text, with no model.

Run it with ``python -m examples.text_agent --socket /tmp/text-agent.sock``; embed it with
``build_app`` (an ASGI app) or ``serve`` (a coroutine that serves until cancelled).
"""

from examples.text_agent.app import build_app, serve

__all__ = ["build_app", "serve"]
