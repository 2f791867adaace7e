"""The module mcp: ``anet mcp``, an MCP server over stdio that offers the running node as tools
(hooks in ``plugin``; docs/mcp.md)."""
