"""`--runtime runsc`: the same sandbox under gVisor (registered by scripts/install-gvisor.sh)."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest

from bench.prepare import seeded_request
from bench.replay.mcp_calls import replay_calls
from sandbox import AsyncSandbox, Limits, docker_client
from servers.engine.seeding import initial_rows
from servers.registry import load_domain

pytestmark = pytest.mark.docker


def test_sandbox_runs_under_gvisor(dataset: Path) -> None:
    runtimes = docker_client().info().get("Runtimes", {})
    if "runsc" not in runtimes:
        pytest.skip("runsc is not a Docker runtime of this daemon: run scripts/install-gvisor.sh")
    domain = load_domain("retail")
    seed = json.loads((dataset / "servers" / domain.module / "seed.json").read_text())
    request = seeded_request(
        {"retail": initial_rows(domain.tables, seed, None)},
        typesense=False,
        limits=Limits(runtime="runsc"),
    )

    async def attempt() -> tuple[list[str], str]:
        async with AsyncSandbox(request) as sb:
            ids = sb.handle.containers.values()
            used = [docker_client().containers.get(cid).attrs["HostConfig"]["Runtime"] for cid in ids]
            calls = await replay_calls(
                sb.handle.servers["retail"], [("get_order", {"order_id": "nope"})], sb.handle.server_headers
            )
            return used, calls[0].result

    used, reply = asyncio.run(attempt())
    assert used and set(used) == {"runsc"}
    assert reply == '{"error": "Tool execution failed: Order not found: nope", "tool": "get_order"}'
