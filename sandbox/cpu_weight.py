"""CPU weight of a container set: low while it boots or waits in the warm pool,
Docker's default once an attempt has it.

On a machine whose cores are all busy, a tool call of an attempt in flight
(the server's Python, a PostgreSQL query) waited behind the boots of sets for
later attempts: every container had the same weight. Containers are created
with `BOOT_SHARES` and raised to `RUNNING_SHARES` at checkout, so the kernel
serves the sets attempts are using first and boots take what is left.

The raise writes the container's cgroup directly where this host shows it
(cgroup v1 `cpu.shares`, v2 `cpu.weight`): `docker update` costs ~20 ms of
dockerd, containerd and runc CPU per container (measured here), three times
per attempt. Elsewhere (a remote daemon, another cgroup layout) it asks Docker.
`docker inspect` then still shows the boot value; the kernel has the new one.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable

import docker.errors

from sandbox.cgroups import container_dirs
from sandbox.docker_api import docker_client

__all__ = ["BOOT_SHARES", "RUNNING_SHARES", "raise_to_running", "shares_to_weight"]

log = logging.getLogger(__name__)

BOOT_SHARES = 128  # an eighth of a running container's weight
RUNNING_SHARES = 1024  # Docker's default


def shares_to_weight(shares: int) -> int:
    """cgroup v1 shares as a v2 weight, the conversion runc and systemd use."""
    return 1 + ((shares - 2) * 9999) // 262142


def _write_cgroup(container_id: str, shares: int) -> bool:
    for directory, version in container_dirs(container_id, "cpu"):
        path, value = (
            (directory / "cpu.shares", shares)
            if version == 1
            else (directory / "cpu.weight", shares_to_weight(shares))
        )
        try:
            path.write_text(str(value))
            return True
        except FileNotFoundError:
            continue
        except OSError:
            return False
    return False


def raise_to_running(container_ids: Iterable[str]) -> None:
    """Give the containers Docker's default CPU weight (blocking: may call the daemon).
    A container already gone is skipped: its loss is the proxy watch's to report."""
    rest = [cid for cid in container_ids if not _write_cgroup(cid, RUNNING_SHARES)]
    if not rest:
        return
    client = docker_client()
    for cid in rest:
        with contextlib.suppress(docker.errors.NotFound):
            try:
                client.api.update_container(cid, cpu_shares=RUNNING_SHARES)
            except docker.errors.APIError as exc:  # the weight is a preference, not a need
                log.warning("could not raise the CPU weight of container %s: %s", cid[:12], exc)
