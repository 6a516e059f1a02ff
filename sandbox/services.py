"""The containers of one attempt: how each is run, hardened and health-checked.

Each service is a small testcontainers `DockerContainer` with the same
hardening: every capability dropped, no-new-privileges, memory, pids and CPU
limits, a read-only root filesystem with tmpfs where the service writes, no
published ports (the host reaches the private network by bridge IP) and never
the Docker socket.

Each `ServiceSpec` carries its readiness probe (`ready`), as testcontainers
keeps `wait_for` with the container: what "answering" means for that service.
The waiting itself (poll, no-progress deadline, death check) is
`sandbox.readiness`'s.
"""

from __future__ import annotations

import contextlib
import os
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

os.environ.setdefault("TESTCONTAINERS_RYUK_DISABLED", "true")

import docker.version
import httpx
import psycopg
from docker.types import EndpointConfig, Mount
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network

from sandbox.cgroup_parent import attempt_parent
from sandbox.cpu_weight import BOOT_SHARES
from sandbox.tls import client_ssl_context

PG_PORT = 5432
TYPESENSE_PORT = 8108
SERVER_PORT = 8000
PG_BOOTSTRAP_PASSWORD = "tbx-bootstrap"  # replaced by per-attempt passwords at seed time
# The role the servers connect as: created (NOLOGIN, with its limits) by the
# postgres image (images/postgres/init-template.sh), given a password at prepare time.
TOOL_ROLE = "tbx_tool"
# The per-attempt secret the servers demand on every request (handed to each
# server container in its environment; servers/engine/app.py checks it).
UPSTREAM_SECRET_ENV = "TBX_UPSTREAM_SECRET"
UPSTREAM_SECRET_HEADER = "X-Tbx-Upstream-Secret"
# The images run their services under fixed ids; tmpfs mounts are handed to
# them with uid=/gid= (some Docker setups ignore a tmpfs mode=).
PG_UID = 999
SERVER_UID = 10001
TYPESENSE_UID = 10002


def _tmpfs(size: str, uid: int) -> str:
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
class PostgresProbe:
    """Ready once the image's bootstrap superuser can connect; the probe returns
    that connection (the sandbox seeds through it and then rotates the password)."""

    @contextlib.contextmanager
    def opened(self, host: str, port: int) -> Iterator[Callable[[], psycopg.Connection[Any]]]:
        dsn = psycopg.conninfo.make_conninfo(
            host=host,
            port=port,
            user="postgres",
            password=PG_BOOTSTRAP_PASSWORD,
            dbname="postgres",
            connect_timeout=2,
        )

        def probe() -> psycopg.Connection[Any]:
            # A refused TCP connect first, as for HttpProbe: libpq's failed attempt costs
            # several times more, and PostgreSQL listens only once its start is done.
            if not host.startswith("/"):  # a Unix socket directory has no TCP port
                socket.create_connection((host, port), timeout=2.0).close()
            return psycopg.connect(dsn, autocommit=True)

        yield probe


@dataclass(frozen=True)
class ServiceSpec:
    role: str  # "postgres", "typesense", "server-<domain>"
    image: str
    port: int
    ready: HttpProbe | PostgresProbe  # how to tell the started service answers
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


def postgres_spec(image: str, limits: Limits | None = None) -> ServiceSpec:
    limits = limits or Limits()
    return ServiceSpec(
        role="postgres",
        image=image,
        port=PG_PORT,
        ready=PostgresProbe(),
        env={
            "TBX_PG_STATEMENT_SECONDS": str(limits.pg_statement_seconds),
            "TBX_PG_IDLE_SECONDS": str(limits.pg_idle_seconds),
        },
        # A command-line setting: only a superuser could change it per session.
        command=["-c", f"temp_file_limit={limits.pg_temp_file_limit}"],
        tmpfs={
            "/var/lib/postgresql": _tmpfs(limits.pg_data, PG_UID),
            "/var/lib/pgwal": _tmpfs(limits.pg_wal, PG_UID),
            "/tmp": _tmpfs("16m", PG_UID),
        },
    )


def typesense_spec(image: str, api_key: str) -> ServiceSpec:
    return ServiceSpec(
        role="typesense",
        image=image,
        port=TYPESENSE_PORT,
        ready=HttpProbe("/health"),
        env={"TYPESENSE_API_KEY": api_key},
        tmpfs={"/data": _tmpfs("128m", TYPESENSE_UID), "/tmp": _tmpfs("16m", TYPESENSE_UID)},
    )


def server_spec(image: str, domain: str, env: dict[str, str]) -> ServiceSpec:
    # The server answers its health check, like every request, only with the
    # per-attempt secret it was handed in `env`.
    secret = env.get(UPSTREAM_SECRET_ENV)
    return ServiceSpec(
        role=f"server-{domain}",
        image=image,
        port=SERVER_PORT,
        ready=HttpProbe("/healthz", {UPSTREAM_SECRET_HEADER: secret} if secret is not None else {}),
        env=env,
        command=[domain, "--port", str(SERVER_PORT)],
        tmpfs={"/tmp": _tmpfs("16m", SERVER_UID)},
    )
