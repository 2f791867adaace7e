"""Publishing: this node's agents, by alias, for other A2A deployments (docs/publishing.md)."""
