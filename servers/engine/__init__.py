"""The shared engine every domain server is built on: table metadata, row
validation, the PostgreSQL store, the tool-call pipeline and the MCP app."""
