"""Replaying tool calls: over MCP in a fresh sandbox (golden states, conformance) and in-process against PostgreSQL."""
