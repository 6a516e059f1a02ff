"""`python -m servers DOMAIN [--port 8000]`: run one domain's MCP server.

Configuration comes from the environment the sandbox sets:
TBX_PG_DSN (tool role, never the superuser), TBX_UPSTREAM_SECRET (the
per-attempt secret every request must carry in the X-Tbx-Upstream-Secret
header), and for policy search TBX_TYPESENSE_URL / TBX_TYPESENSE_API_KEY /
TBX_TYPESENSE_COLLECTION.
"""

from __future__ import annotations

import argparse
import logging
import os

import uvicorn

from servers.engine.app import UPSTREAM_SECRET_ENV, DomainRuntime, build_app
from servers.knowledge import PolicySearch
from servers.registry import load_domain


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
