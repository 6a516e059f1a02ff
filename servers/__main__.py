"""`python -m servers DOMAIN [--port 8000]`: run one domain's MCP server.

Configuration comes from the environment the sandbox sets:
TBX_PG_DSN (tool role, never the superuser), TBX_UPSTREAM_SECRET (the
per-attempt secret every request must carry in the X-Tbx-Upstream-Secret
header), and for policy search TBX_TYPESENSE_URL / TBX_TYPESENSE_API_KEY /
TBX_TYPESENSE_COLLECTION.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import os
import sys


def _skip_package_init(*names: str) -> None:
    """Register packages without running their `__init__`: `mcp/__init__` imports
    the SDK's client side and `mcp.server/__init__` the high-level MCPServer, about
    half of the SDK's modules, none of which a low-level server uses. Its
    submodules (mcp.server.lowlevel, mcp.server.streamable_http, ...) import as usual.
    Only this entry point does it: processes that use the client import `mcp` normally."""
    for name in names:
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None or spec.submodule_search_locations is None:
            continue
        sys.modules[name] = importlib.util.module_from_spec(spec)


_skip_package_init("mcp", "mcp.server")

import uvicorn  # noqa: E402  (after the package registration above)

from servers.engine.app import UPSTREAM_SECRET_ENV, DomainRuntime, build_app  # noqa: E402
from servers.knowledge import PolicySearch  # noqa: E402
from servers.registry import load_domain  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m servers")
    parser.add_argument("domain")
    parser.add_argument("--host", default="0.0.0.0")
    parser.add_argument("--port", type=int, default=8000)
    args = parser.parse_args()
    logging.basicConfig(level=os.environ.get("TBX_LOG_LEVEL", "WARNING"))
    secret = os.environ.get(UPSTREAM_SECRET_ENV, "")
    if not secret:
        parser.error(f"{UPSTREAM_SECRET_ENV} is not set: the server answers only requests carrying it")
    domain = load_domain(args.domain)
    services = {"policy_search": PolicySearch.from_env().search}
    runtime = DomainRuntime(domain, os.environ["TBX_PG_DSN"], services)
    uvicorn.run(
        build_app(runtime, secret), host=args.host, port=args.port, log_level="warning", access_log=False
    )


if __name__ == "__main__":
    main()
