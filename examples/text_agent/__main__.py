"""``python -m examples.text_agent --socket PATH | --port N [--token-file FILE]``."""

import sys

from examples.agent_server import run_cli
from examples.text_agent.app import serve

if __name__ == "__main__":
    sys.exit(run_cli(serve, "An A2A agent that counts, summarises and transforms text."))
