"""Direct peers: A2A deployments reached without a hub, shown on the local endpoint."""
