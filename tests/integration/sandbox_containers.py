"""The sandboxes of the integration tests: the demo pack most of them run
(`DEMO_PACK`), a started local Docker provider that is closed and swept however
the test ends (`started_provider`), and a sandbox's containers seen from Docker
by the server tests (`tbx session-proxy`, `tbx env serve`): waiting for them to
be gone after a teardown, and signalling the processes of a session's server
container (SIGSTOP freezes it, SIGCONT thaws it)."""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import AsyncIterator
from typing import Any

import docker
import docker.errors

from sandbox import DockerProvider


@contextlib.asynccontextmanager
async def started_provider(run_id: str, **kwargs: Any) -> AsyncIterator[DockerProvider]:
    """`DockerProvider(**kwargs)` started for `run_id`; closed and the run swept afterwards."""
    provider = DockerProvider(**kwargs)
    await provider.start(run_id)
    try:
        yield provider
    finally:
        await provider.close()
        await provider.sweep(run_id)


def containers_gone(dclient: docker.DockerClient, ids: list[str], timeout: float = 90) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = []
        for cid in ids:
            try:
                dclient.containers.get(cid)
                alive.append(cid)
            except docker.errors.NotFound:
                pass
        if not alive:
            return True
        time.sleep(0.5)
    return False


def signal_server(dclient: docker.DockerClient, containers: dict[str, str], sig: int) -> None:
    server = next(cid for role, cid in containers.items() if role not in ("postgres", "typesense"))
    for proc in dclient.containers.get(server).top()["Processes"]:
        os.kill(int(proc[1]), sig)
