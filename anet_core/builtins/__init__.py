"""Built-in plugins: parts of the core that register through the same hooks as any module."""
