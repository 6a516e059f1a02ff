"""Domain MCP tool servers backed by PostgreSQL.

This package runs inside the `servers` image and must not import bench/, sandbox/
or judge/: nothing golden may ever be reachable from a tool server.
"""
