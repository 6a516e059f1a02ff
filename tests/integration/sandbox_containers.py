"""A sandbox's containers seen from Docker by the server tests (`tbx session-proxy`,
`tbx env serve`): waiting for them to be gone after a teardown, and signalling the
processes of a session's server container (SIGSTOP freezes it, SIGCONT thaws it)."""

from __future__ import annotations

import os
import time

import docker
import docker.errors


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
