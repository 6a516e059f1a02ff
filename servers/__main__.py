"""`python -m servers DOMAIN [--port 8000]`: run one domain's MCP server.

Configuration comes from the environment the sandbox sets:
TBX_PG_DSN (tool role, never the superuser), TBX_UPSTREAM_SECRET (the
per-attempt secret every request must carry in the X-Tbx-Upstream-Secret
header), and for policy search TBX_TYPESENSE_URL / TBX_TYPESENSE_API_KEY /
TBX_TYPESENSE_COLLECTION.
"""

from __future__ import annotations

import argparse
import gc
import importlib.util
import logging
import os
import sys

# The imports below allocate hundreds of thousands of long-lived objects (classes,
# schemas, code): collecting them while they are being built only costs CPU, so the
# collector is off until the app is built, then the survivors are frozen out of its
# reach for good (gc.freeze), so later collections never walk them again.
gc.disable()


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


def _defer_model_builds() -> None:
    """Build each pydantic model's validator on first use instead of at class creation:
    `mcp_types` defines both protocol eras' ~460 wire models at import, of which one
    server validates or dumps a few dozen. Same validators, built later or never
    (`defer_build` is pydantic's own switch; subclasses inherit it from BaseModel's config)."""
    import pydantic

    pydantic.BaseModel.model_config["defer_build"] = True


_skip_package_init("mcp", "mcp.server")
_defer_model_builds()

import uvicorn  # noqa: E402  (after the package registration above)

from servers.engine.app import UPSTREAM_SECRET_ENV, DomainRuntime, build_app  # noqa: E402
from servers.engine.serving import SecondTickServer  # noqa: E402
from servers.registry import load_domain  # noqa: E402
from servers.toolsets.knowledge import PolicySearch  # noqa: E402


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
    app = build_app(runtime, secret)
    gc.freeze()
    gc.enable()
    config = uvicorn.Config(
        app,
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
        # Named, not "auto": auto probes for uvloop, httptools and websockets at start.
        loop="asyncio",
        http="h11",
        ws="none",
    )
    SecondTickServer(config).run()


if __name__ == "__main__":
    main()
