"""The control plane: the daemon's loopback API for the CLI, behind the control token."""
