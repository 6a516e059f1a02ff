"""Domains of the ThinkingBox-Bench v1.0 scenarios and servers.

In v1.0 every scenario has exactly one server and both carry the same name
(``sandbox_external_retail`` is the scenario, the world_state key and the
trace's server name). Which domain a server belongs to is read off the
`Domain` objects of `servers` (`servers.registry.server_to_domain`).
"""

from __future__ import annotations

from servers.engine.tools import export_module
from servers.registry import server_to_domain


def domain_of(scenario: str, server: str | None = None) -> str:
    """Short domain name of a scenario (or else of its server); unknown names map to the scenario name."""
    known = server_to_domain()
    if scenario in known:
        return known[scenario]
    if server is not None and server in known:
        return known[server]
    return scenario


def server_module(server: str) -> str:
    """Module directory of a server in the export (``mcp_<server>``)."""
    return export_module(server)
