"""Names of the ThinkingBox-Bench v1.0 scenarios, servers, domains and server modules.

In v1.0 every scenario has exactly one server and both carry the same name
(``sandbox_external_retail`` is the scenario, the world_state key and the
trace's server name); the MCP server package is ``mcp_<server>``.
"""

from __future__ import annotations

# scenario / server name -> short domain name
DOMAINS: dict[str, str] = {
    "sandbox_external_retail": "retail",
    "sandbox_auto_insurance": "auto_insurance",
    "sandbox_consulting": "consulting",
    "external_booking_v1": "travel",
    "sandbox_neobank_support_v1": "neobank",
}

# server name -> server module directory (``servers/<module>/`` in the export)
SERVER_MODULES: dict[str, str] = {name: f"mcp_{name}" for name in DOMAINS}


def domain_of(scenario: str, server: str | None = None) -> str:
    """Short domain name of a scenario (or else of its server); unknown names map to the scenario name."""
    if scenario in DOMAINS:
        return DOMAINS[scenario]
    if server is not None and server in DOMAINS:
        return DOMAINS[server]
    return scenario


def server_module(server: str) -> str:
    """Module directory of a server (``mcp_<server>``)."""
    return SERVER_MODULES.get(server, f"mcp_{server}")
