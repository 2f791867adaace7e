"""An A2A 1.0 agent that plays the A2A TCK's scenarios, for conformance runs and tests.

Run it with ``python -m examples.tck_agent --port 0``; embed it with ``build_app`` or ``serve``.
"""

from examples.tck_agent.app import build_app, serve

__all__ = ["build_app", "serve"]
