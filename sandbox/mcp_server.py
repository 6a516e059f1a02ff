"""A domain's MCP tool server, one container per domain of an attempt: its
container config and environment (where its PostgreSQL and Typesense are, the
upstream secret), its readiness probe, its MCP URL and the tool listing taken
at prepare.

Every request to a server, its health check too, must carry the attempt's
upstream secret (servers/engine/app.py checks it): a host process cannot skip
the proxy's token and allow-list, and a bridge address Docker hands to another
attempt answers nothing to this one's proxy.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from sandbox.preparer import TypesenseEndpoint
from sandbox.services import HttpProbe, ServiceSpec, tmpfs_mount

log = logging.getLogger(__name__)

SERVER_PORT = 8000
SERVER_UID = 10001  # the image runs the server as `tbx` with this uid
# The per-attempt secret the servers demand on every request (handed to each
# server container in its environment; servers/engine/app.py checks it).
UPSTREAM_SECRET_ENV = "TBX_UPSTREAM_SECRET"
UPSTREAM_SECRET_HEADER = "X-Tbx-Upstream-Secret"


def server_role(domain: str) -> str:
    return f"server-{domain}"


def server_env(tool_dsn: str, typesense: TypesenseEndpoint | None, secret: str) -> dict[str, str]:
    """A server's environment: peers by address (no name resolution in an attempt)."""
    return {
        "TBX_PG_DSN": tool_dsn,
        "TBX_TYPESENSE_URL": typesense.url if typesense else "",
        "TBX_TYPESENSE_API_KEY": typesense.api_key if typesense else "",
        # Created at prepare time only when the task has policy documents;
        # until then the server reports search as unavailable.
        "TBX_TYPESENSE_COLLECTION": typesense.collection if typesense else "",
        UPSTREAM_SECRET_ENV: secret,
    }


def server_spec(image: str, domain: str, env: dict[str, str]) -> ServiceSpec:
    # The server answers its health check, like every request, only with the
    # per-attempt secret it was handed in `env`.
    secret = env.get(UPSTREAM_SECRET_ENV)
    return ServiceSpec(
        role=server_role(domain),
        image=image,
        port=SERVER_PORT,
        ready=HttpProbe("/healthz", {UPSTREAM_SECRET_HEADER: secret} if secret is not None else {}),
        env=env,
        command=[domain, "--port", str(SERVER_PORT)],
        tmpfs={"/tmp": tmpfs_mount("16m", SERVER_UID)},
    )


def mcp_url(ip: str) -> str:
    """The server's MCP endpoint (bridge IP)."""
    return f"http://{ip}:{SERVER_PORT}/mcp"


def list_tools(servers: Mapping[str, str], secret: str, interface: str) -> dict[str, list[dict[str, Any]]]:
    """Each server's tools/list (read-only: no row is touched); a server that does not
    answer is left out (its registration lists it and reports the failure)."""
    from sandbox.proxy.clients import server_tools  # the MCP client loads only when used

    listed: dict[str, list[dict[str, Any]]] = {}
    headers = {UPSTREAM_SECRET_HEADER: secret}
    for domain, url in servers.items():
        try:
            listed[domain] = server_tools(url, headers, interface)
        except Exception as exc:
            log.warning("listing the %s server's tools at prepare failed: %r", domain, exc)
    return listed
