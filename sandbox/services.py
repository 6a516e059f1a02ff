"""What every container of an attempt shares: hardening, limits, and the shape
of a service (`ServiceSpec`: image, env, tmpfs, its readiness probe).

Each service is a small testcontainers `DockerContainer` with the same
hardening: every capability dropped, no-new-privileges, memory, pids and CPU
limits, a read-only root filesystem with tmpfs where the service writes, no
published ports (the host reaches the private network by bridge IP) and never
the Docker socket.

The services themselves each have a module that keeps, as testcontainers keeps
a container's config, URL and `wait_for` together, what is particular to them:
`sandbox.postgres` (container config, DSNs, the bootstrap probe, seeding, the
prepared-state marker), `sandbox.typesense` (config, URL, indexing) and
`sandbox.mcp_server` (a domain server's config, env, MCP URL, tool listing).
`sandbox.sandbox.Sandbox` assembles them. The waiting itself (poll,
no-progress deadline, death check) is `sandbox.readiness`'s.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

import docker.version
import httpx
from docker.types import EndpointConfig, Mount
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network

from sandbox.cgroup_parent import attempt_parent
from sandbox.cpu_weight import BOOT_SHARES
from sandbox.tls import client_ssl_context


def tmpfs_mount(size: str, uid: int) -> str:
    """A tmpfs mount owned by the service's fixed uid (some Docker setups ignore a
    tmpfs mode=, so the images run their services under fixed ids and get uid=/gid=)."""
    return f"rw,nosuid,nodev,noexec,size={size},uid={uid},gid={uid}"


@dataclass(frozen=True)
class Limits:
    """Per-container limits of an attempt (docs/sandbox.md, "Hardening")."""

    memory: str = "512m"
    pids: int = 256
    # CPU quota per container, in cores (CFS quota; None: none). One core: a runaway
    # container can no longer take a 2-core machine's both cores, and a normal attempt
    # is not slowed (measured: benchmarks/cpu_quota.py, docs/sandbox.md).
    cpus: float | None = 1.0
    runtime: str | None = None  # e.g. "runsc" (gVisor)
    # PostgreSQL limits the tool role cannot lift: temp_file_limit is superuser-only;
    # the statement and idle-transaction limits are enforced by a superuser watchdog in
    # the postgres container (the role's own statement_timeout of 10 s is only a default).
    pg_statement_seconds: int = 30
    pg_idle_seconds: int = 120
    pg_temp_file_limit: str = "64MB"
    pg_data: str = "256m"  # tmpfs for the data directory (counts against `memory`)
    pg_wal: str = "64m"  # tmpfs for the WAL, apart so a full data tmpfs is a clean error


class Probe(Protocol):
    """How to tell a started service answers: `opened(host, port)` yields a callable that
    raises until it does, then returns what the sandbox keeps of the answer (nothing, or
    PostgreSQL's bootstrap connection: `sandbox.postgres.PostgresProbe`)."""

    def opened(self, host: str, port: int) -> contextlib.AbstractContextManager[Callable[[], Any]]: ...


@dataclass(frozen=True)
class HttpProbe:
    """Ready once a GET of `path` answers 2xx (with `headers`)."""

    path: str
    headers: dict[str, str] = field(default_factory=dict)

    @contextlib.contextmanager
    def opened(self, host: str, port: int) -> Iterator[Callable[[], None]]:
        url = f"http://{host}:{port}{self.path}"
        # One client for the whole wait: a bare httpx.get() builds a new client (and TLS
        # context) per call, ~45 ms of CPU, which at a 10 ms poll interval took a core away
        # from the very containers being waited for.
        # A refused TCP connect costs ~0.03 ms of CPU, a refused httpx GET ~0.3 ms; the server
        # binds its port only once its imports are done, so until then only the cheap probe
        # runs (measured under load: 75 -> 42 ms of this process's CPU per second of waiting).
        with httpx.Client(timeout=1.0, headers=self.headers, verify=client_ssl_context()) as client:

            def probe() -> None:
                socket.create_connection((host, port), timeout=1.0).close()
                client.get(url).raise_for_status()

            yield probe


@dataclass(frozen=True)
class ServiceSpec:
    role: str  # "postgres", "typesense", "server-<domain>"
    image: str
    port: int
    ready: Probe  # how to tell the started service answers
    env: dict[str, str] = field(default_factory=dict)
    command: list[str] | None = None
    tmpfs: dict[str, str] = field(default_factory=dict)
    user: str | None = None


def hardened_container(
    spec: ServiceSpec,
    network: Network,
    labels: dict[str, str],
    limits: Limits,
    ip: str | None = None,
    dns: str | None = None,
    mounts: list[Mount] | None = None,
) -> DockerContainer:
    """ip: the container's static address on `network`; dns: its only resolver
    upstream (an address nothing answers, see sandbox.subnets); mounts: read-only
    volumes of the image's own code (sandbox.runtime_volumes)."""
    kwargs: dict[str, Any] = {
        "labels": labels,
        "cap_drop": ["ALL"],
        "security_opt": ["no-new-privileges:true"],
        "mem_limit": limits.memory,
        "memswap_limit": limits.memory,
        "pids_limit": limits.pids,
        **({"nano_cpus": int(limits.cpus * 1e9)} if limits.cpus else {}),
        # low until an attempt has the set (sandbox.cpu_weight)
        "cpu_shares": BOOT_SHARES,
        **({"cgroup_parent": parent} if (parent := attempt_parent()) else {}),
        "read_only": True,
        "ipc_mode": "private",
    }
    if ip:
        kwargs["networking_config"] = {
            network.name: EndpointConfig(docker.version.__version__, ipv4_address=ip)
        }
    if dns:
        kwargs["dns"] = [dns]
    if mounts:
        assert all(m["ReadOnly"] for m in mounts), "an attempt container mounts nothing writable"
        kwargs["mounts"] = mounts
    if spec.user:
        kwargs["user"] = spec.user
    if limits.runtime:
        kwargs["runtime"] = limits.runtime
    container = DockerContainer(spec.image, env=spec.env, network=network, **kwargs)
    if spec.command:
        container.with_command(spec.command)
    # DockerContainer keeps tmpfs separately and would override ours with {}.
    container.tmpfs = dict(spec.tmpfs)
    return container
