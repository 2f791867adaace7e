"""``python -m examples.tck_agent --socket PATH | --port N [--token-file FILE]``."""

import sys

from examples.agent_server import run_cli
from examples.tck_agent.app import serve

if __name__ == "__main__":
    sys.exit(run_cli(serve, "An A2A agent that plays the A2A TCK's scenarios."))
