"""One attempt's disposable container set: `Sandbox` assembles the services
(`sandbox.postgres`, `sandbox.typesense`, `sandbox.mcp_server`) on a private
network, starts them in order, prepares them and tears them down.

    with Sandbox(SandboxRequest(domains=["retail"], prepare=preparer)) as sb:
        sb.handle.servers["retail"]          # MCP endpoint (bridge IP); send sb.handle.server_headers
        sb.handle.pg.admin_dsn("retail")     # host-side (judge) connection

The sandbox knows no domain: `prepare` (a `sandbox.preparer.Preparer`, owned
by the caller) checks the request and fills the schemas and the search index.

`async with AsyncSandbox(...)` does the same without blocking the event loop.
Teardown always runs (normal exit, exception, Ctrl-C); anything a killed
process leaves behind carries labels the sweeper finds.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import threading
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

import docker.errors
import docker.types
import psycopg
from pydantic import BaseModel, ConfigDict, Field, model_validator
from testcontainers.core.container import DockerContainer
from testcontainers.core.network import Network

from sandbox import labels as lbl
from sandbox import runtime_volumes
from sandbox.checkout_server import (
    CheckoutServer,
    checkout_server_spec,
    data_mounts,
    init_server,
    teardown,
)
from sandbox.checkout_server import role as checkout_role
from sandbox.cpu_weight import raise_to_running
from sandbox.docker_api import docker_client, remove_container, remove_network
from sandbox.errors import (
    ContainerStartError,
    ImageMissingError,
    SandboxError,
)
from sandbox.host_firewall import bridge_name, ensure_host_guard
from sandbox.images import mark_in_use, require_image
from sandbox.mcp_server import (
    UPSTREAM_SECRET_HEADER,
    list_tools,
    mcp_url,
    server_env,
    server_role,
    server_spec,
)
from sandbox.postgres import (
    PgEndpoint,
    PostgresProbe,
    postgres_spec,
    read_prepared,
    seed,
    unchanged_states,
)
from sandbox.preparer import PreparedState, Preparer, TypesenseEndpoint
from sandbox.readiness import wait_ready
from sandbox.services import Limits, ServiceSpec, hardened_container
from sandbox.subnets import AttemptSubnet, with_subnet
from sandbox.timeouts import SANDBOX_TIMEOUTS
from sandbox.typesense import POLICY_COLLECTION, typesense_endpoint, typesense_spec

if TYPE_CHECKING:
    from sandbox.reaper import Reaper


class SandboxRequest(BaseModel):
    model_config = ConfigDict(arbitrary_types_allowed=True)

    domains: list[str] = Field(default_factory=list)  # native domains (tbx's own servers)
    # A checkout's servers (servers.yaml, type mcp-process), each in a container of its own,
    # initialised at boot with its world state (so a pool's spares are ready for any task
    # of that world state), in server_config order.
    checkout_servers: list[CheckoutServer] = Field(default_factory=list)
    # What the schemas and the search index are filled with at prepare time
    # (None: empty schemas, no documents). A pool boots without one.
    prepare: Preparer | None = None
    typesense: bool = True
    run_id: str = Field(default_factory=lambda: lbl.new_id("run"))
    attempt_id: str = Field(default_factory=lambda: lbl.new_id("att"))
    limits: Limits = Field(default_factory=Limits)
    start_timeout: float = SANDBOX_TIMEOUTS.boot
    # Image tags resolved once per run (`resolve_images()`), so a long run never
    # mixes builds; None resolves them at start from the current sources.
    images: dict[str, str] | None = None

    @model_validator(mode="after")
    def _some_server(self) -> SandboxRequest:
        if not self.domains and not self.checkout_servers:
            raise ValueError("a sandbox request needs a domain or a checkout server")
        return self

    @property
    def server_names(self) -> list[str]:
        """Every server of the set: the native domains, then the checkout servers."""
        return [*self.domains, *(s.name for s in self.checkout_servers)]

    @property
    def pool_key(self) -> str:
        """The name a plan counts this request's checkouts under (`DockerProvider.plan`)."""
        return ",".join(self.server_names)


class AttemptHandle(BaseModel):
    run_id: str
    attempt_id: str
    network: str
    pg: PgEndpoint
    typesense_url: str | None = None
    typesense_api_key: str | None = None
    collection: str | None = None
    servers: dict[str, str] = Field(default_factory=dict)  # domain or checkout server -> MCP URL
    # The checkout servers among `servers` (sandbox.checkout_server), in server_config order,
    # and what each answered to __reserved__init (minus `status`).
    checkout_servers: list[str] = Field(default_factory=list)
    init_results: dict[str, dict[str, Any]] = Field(default_factory=dict)
    # The servers answer only requests carrying it (`server_headers`): a host
    # process cannot skip the proxy's token and allow-list, and a bridge address
    # Docker hands to another attempt answers nothing to this one's proxy.
    upstream_secret: str = ""
    containers: dict[str, str] = Field(default_factory=dict)  # role -> container id
    timings: dict[str, float] = Field(default_factory=dict)
    # domain -> its server's tools/list (MCP JSON), taken at prepare: the proxy's
    # registration reuses it instead of listing on the attempt's critical path.
    # Missing for a server that did not list (the registration then lists itself).
    tools: dict[str, list[dict[str, Any]]] = Field(default_factory=dict, exclude=True)

    @property
    def server_headers(self) -> dict[str, str]:
        """The header every request to `servers` must carry."""
        return {UPSTREAM_SECRET_HEADER: self.upstream_secret}


def resolve_images(typesense: bool = True) -> dict[str, str]:
    """The image tags an attempt runs, checked to exist."""
    names = ["postgres", "servers", *(["typesense"] if typesense else [])]
    tags = {name: require_image(name) for name in names}
    mark_in_use(list(tags.values()))
    return tags


class Sandbox:
    """A started container set; `close()` (or leaving the `with` block) removes it."""

    def __init__(self, request: SandboxRequest):
        self.request = request
        self.handle: AttemptHandle | None = None
        self._network: Network | None = None
        self._subnet: AttemptSubnet | None = None
        self._containers: dict[str, DockerContainer] = {}
        self._closed = False
        self._ips: dict[str, str] = {}
        self._timings: dict[str, float] = {}
        self._admin_conn: psycopg.Connection[Any] | None = None
        # The initial state the preparer read after seeding, and the connection its
        # write marker is checked on at the hand-over (`prepared_states`; one use).
        self._prepared: PreparedState | None = None
        self._marker_conn: psycopg.Connection[Any] | None = None
        # Where the services listen and their per-attempt secrets, fixed at boot.
        self._pg: PgEndpoint | None = None
        self._typesense: TypesenseEndpoint | None = None
        self._upstream_secret = ""
        self._init_results: dict[str, dict[str, Any]] = {}
        self._checkout_tools: dict[str, list[dict[str, Any]]] = {}  # listed at boot, after init
        self._data_mounts: dict[str, list[docker.types.Mount]] = {}
        # start() and close() never overlap: a close() from another thread (an asyncio
        # cancellation of AsyncSandbox) asks a running start to give up, waits for it to
        # finish, and only then removes what it created.
        self._lock = threading.RLock()
        self._abort = threading.Event()

    # ---- context manager ---------------------------------------------------
    @property
    def attempt_id(self) -> str:
        return self.request.attempt_id

    def __enter__(self) -> Sandbox:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ---- start -------------------------------------------------------------
    def start(self) -> AttemptHandle:
        """Boot the containers and prepare them with the request's seed and documents."""
        with self._lock:
            try:
                self.boot()
                self.handle = self.prepare()
                # used at once (not pooled): the weight of a set in use (sandbox.cpu_weight)
                raise_to_running(self.handle.containers.values())
            except BaseException:
                self.close()
                raise
            return self.handle

    def _labels(self, role: str) -> dict[str, str]:
        return lbl.labels_for(self.request.run_id, self.request.attempt_id, role, os.getpid())

    def boot(self) -> None:
        """Phase 1: network and containers started, every service answering.
        Nothing task-specific happens here, so a pool can run it ahead of time."""
        with self._lock:  # a concurrent close() waits for this to give up
            self._boot()

    def _boot(self) -> None:
        req = self.request
        t0 = time.monotonic()
        self._raise_if_aborted()
        images = req.images or resolve_images(typesense=req.typesense)
        if req.prepare is not None:
            req.prepare.check(req.domains)  # fail before starting anything on bad input

        ensure_host_guard()
        client = docker_client()
        self._subnet = with_subnet(client, self._create_network)

        # Static addresses in start order, known before anything starts: peers are configured
        # by IP, never by name (postgres, typesense, then one per domain server).
        n_services = 1 + int(req.typesense) + len(req.domains) + len(req.checkout_servers)
        if n_services > self._subnet.capacity:
            raise SandboxError(
                f"{n_services} services do not fit in one attempt subnet ({self._subnet.capacity})"
            )
        pg = self._pg = PgEndpoint(
            host=self._subnet.address(0),
            admin_password=secrets.token_urlsafe(18),
            tool_password=secrets.token_urlsafe(18),
        )
        ts_key = secrets.token_urlsafe(18)
        ts = self._typesense = typesense_endpoint(self._subnet.address(1), ts_key) if req.typesense else None
        self._upstream_secret = secrets.token_urlsafe(32)
        # PostgreSQL only where a native domain keeps its rows (a checkout server keeps its own
        # state); its address stays reserved, so every other service's address is the same.
        specs: list[ServiceSpec] = [postgres_spec(images["postgres"], req.limits)] if req.domains else []
        if ts is not None:
            specs.append(typesense_spec(images["typesense"], ts.api_key))
        specs += [
            server_spec(images["servers"], d, server_env(pg.tool_dsn(d), ts, self._upstream_secret))
            for d in req.domains
        ]
        specs += [checkout_server_spec(server, self._upstream_secret) for server in req.checkout_servers]
        self._data_mounts = {checkout_role(s): data_mounts(s) for s in req.checkout_servers}
        first = 0 if req.domains else 1
        addresses = {spec.role: self._subnet.address(first + i) for i, spec in enumerate(specs)}

        with ThreadPoolExecutor(max_workers=len(specs)) as pool:
            started = {
                spec.role: pool.submit(self._run_container, spec, addresses[spec.role]) for spec in specs
            }
            self._ips = {role: fut.result() for role, fut in started.items()}
            t_started = time.monotonic()
            deadline = t0 + req.start_timeout
            waits = [pool.submit(self._wait_ready, spec, deadline) for spec in specs]
            self._timings = dict(fut.result() for fut in waits)
        self._timings["containers_started"] = t_started - t0
        if req.checkout_servers:
            self._init_checkout_servers()
        self._timings["booted"] = time.monotonic() - t0

    def _init_checkout_servers(self) -> None:
        """__reserved__init with each checkout server's world state, in server_config order
        (as the reference: one after another). Part of the boot: a warm spare is initialised."""
        t = time.monotonic()
        for server in self.request.checkout_servers:
            self._raise_if_aborted()
            url = mcp_url(self._ips[checkout_role(server)])
            interface = bridge_name(self.request.attempt_id)
            self._init_results[server.name] = init_server(server, url, self._upstream_secret, interface)
        self._timings["checkout_init"] = time.monotonic() - t
        # Listed here too, so a pool's spare needs nothing more at the hand-over.
        urls = {s.name: mcp_url(self._ips[checkout_role(s)]) for s in self.request.checkout_servers}
        self._checkout_tools = self._list_tools(urls)

    def prepare(self) -> AttemptHandle:
        """Phase 2: rotate secrets, seed PostgreSQL, index the policy documents."""
        with self._lock:
            return self._prepare()

    def _prepare(self) -> AttemptHandle:
        self._raise_if_aborted()
        req = self.request
        if req.prepare is not None:
            req.prepare.check(req.domains)  # a pooled sandbox meets its preparer only now
        t0 = time.monotonic()
        pg, ts = self._pg, self._typesense
        if pg is None:
            raise SandboxError("prepare() called before boot()")
        collection: str | None = None
        servers = {d: mcp_url(self._ips[server_role(d)]) for d in req.server_names}
        with ThreadPoolExecutor(max_workers=3) as pool:
            seeded = pool.submit(self._seed_postgres, pg) if req.domains else None
            indexed = pool.submit(self._index_documents, ts) if ts is not None else None
            native = {d: servers[d] for d in req.domains}
            listed = pool.submit(self._list_tools, native) if native else None
            if seeded is not None:
                self._timings["postgres_seeded"] = seeded.result()
            if indexed is not None and (seconds := indexed.result()) is not None:
                collection = POLICY_COLLECTION
                self._timings["policies_indexed"] = seconds
            listed_now = listed.result() if listed is not None else {}
            tools = {
                d: t for d in req.server_names if (t := listed_now.get(d) or self._checkout_tools.get(d))
            }
        if req.prepare is not None and req.domains:
            self._capture(pg)
        self._timings["prepared"] = time.monotonic() - t0
        self._timings["ready"] = self._timings["booted"] + self._timings["prepared"]
        assert self._network is not None
        return AttemptHandle(
            run_id=req.run_id,
            attempt_id=req.attempt_id,
            network=self._network.name,
            pg=pg,
            typesense_url=ts.url if ts is not None else None,
            typesense_api_key=ts.api_key if ts is not None else None,
            collection=collection,
            servers=servers,
            checkout_servers=[s.name for s in req.checkout_servers],
            init_results=dict(self._init_results),
            upstream_secret=self._upstream_secret,
            containers={role: c.get_wrapped_container().id for role, c in self._containers.items()},
            timings=dict(self._timings),
            tools=tools,
        )

    def _list_tools(self, servers: dict[str, str]) -> dict[str, list[dict[str, Any]]]:
        t = time.monotonic()
        listed = list_tools(servers, self._upstream_secret, bridge_name(self.request.attempt_id))
        self._timings["tools_listed"] = time.monotonic() - t
        return listed

    def _capture(self, pg: PgEndpoint) -> None:
        """The preparer's snapshot of every domain and its write marker's connection."""
        prepare = self.request.prepare
        assert prepare is not None
        t = time.monotonic()
        read = read_prepared(pg, self.request.domains, prepare)
        if read is None:
            return
        self._prepared, self._marker_conn = read
        self._timings["initial_state_read"] = time.monotonic() - t

    def prepared_states(self, fingerprint: str) -> dict[str, Any] | None:
        """The initial states the preparer read after seeding (domain -> snapshot), if they
        were read by a preparer of `fingerprint` and no transaction has written to the
        database since (its write marker is unchanged); else None: dump it now. One use:
        the attempt's own writes follow."""
        with self._lock:
            prepared, conn = self._prepared, self._marker_conn
            self._prepared = self._marker_conn = None
        if conn is None:
            return None
        return unchanged_states(prepared, conn, fingerprint)

    def _raise_if_aborted(self) -> None:
        if self._abort.is_set() or self._closed:
            raise SandboxError(f"sandbox {self.request.attempt_id} was closed while starting")

    def _create_network(self, subnet: AttemptSubnet) -> AttemptSubnet:
        network = Network(
            docker_network_kw={
                "internal": True,
                "driver": "bridge",
                "labels": self._labels("network"),
                "options": {"com.docker.network.bridge.name": bridge_name(self.request.attempt_id)},
                "ipam": docker.types.IPAMConfig(
                    pool_configs=[docker.types.IPAMPool(subnet=subnet.subnet, gateway=subnet.gateway)]
                ),
            }
        )
        network.create()
        self._network = network
        return subnet

    def _run_container(self, spec: ServiceSpec, ip: str) -> str:
        assert self._network is not None and self._subnet is not None
        self._raise_if_aborted()
        container = hardened_container(
            spec,
            self._network,
            self._labels(spec.role),
            self.request.limits,
            ip=ip,
            dns=self._subnet.dns_sink,
            mounts=runtime_volumes.mounts_for(spec.image) + self._data_mounts.get(spec.role, []),
        )
        self._containers[spec.role] = container
        try:
            container.start()
        except docker.errors.APIError as exc:
            if _image_gone(spec.image):
                # Docker answers a missing image with a pull attempt; say what happened instead.
                raise ImageMissingError(
                    f"{spec.role}: image {spec.image} no longer exists (removed while this run used it, "
                    "e.g. by a `tbx images build` of newer sources); rebuild with `tbx images build`"
                ) from exc
            raise ContainerStartError(f"{spec.role}: docker could not start {spec.image}: {exc}") from exc
        # The address was assigned (EndpointConfig ipv4_address), so no inspect is needed to learn it.
        return ip

    def _wait_ready(self, spec: ServiceSpec, deadline: float) -> tuple[str, float]:
        """Wait for the started service to answer its probe (`spec.ready`)."""
        t = time.monotonic()
        with spec.ready.opened(self._ips[spec.role], spec.port) as probe:
            answer = wait_ready(
                spec.role,
                self._containers[spec.role],
                probe,
                deadline=deadline,
                start_timeout=self.request.start_timeout,
                raise_if_aborted=self._raise_if_aborted,
            )
        if isinstance(spec.ready, PostgresProbe):
            self._admin_conn = answer  # the bootstrap connection prepare() seeds through
        return f"{spec.role}_ready", time.monotonic() - t

    def _seed_postgres(self, pg: PgEndpoint) -> float:
        t = time.monotonic()
        if self._admin_conn is None:
            raise SandboxError("prepare() called before boot()")
        seed(self._admin_conn, pg, self.request.domains, self.request.prepare)
        return time.monotonic() - t

    def _index_documents(self, typesense: TypesenseEndpoint) -> float | None:
        """Seconds spent indexing, or None when the preparer had no documents."""
        if self.request.prepare is None:
            return None
        t = time.monotonic()
        return time.monotonic() - t if self.request.prepare.index(typesense) else None

    # ---- teardown ----------------------------------------------------------
    def close(self) -> None:
        """Remove every container and the network of this attempt. Idempotent."""
        self._abort.set()  # a start running in another thread gives up at its next step
        with self._lock:
            if self._closed:
                return
            self._closed = True
            self._teardown_checkout_servers()
            self._remove_all()

    def _teardown_checkout_servers(self) -> None:
        """__reserved__teardown where a checkout server has it (bounded; errors ignored)."""
        if not self.request.checkout_servers or not self._ips:
            return
        for server in self.request.checkout_servers:
            ip = self._ips.get(checkout_role(server))
            if ip is not None:
                with contextlib.suppress(Exception):
                    teardown(
                        server.name, mcp_url(ip), self._upstream_secret, bridge_name(self.request.attempt_id)
                    )

    def remove_leftovers(self) -> None:
        """Remove what a close() could not (the daemon was away): idempotent, by label."""
        with self._lock:
            self._closed = True
            self._remove_all()

    def _remove_all(self) -> None:
        for conn in (self._admin_conn, self._marker_conn):
            if conn is not None:
                with contextlib.suppress(Exception):
                    conn.close()
        client = docker_client()
        # sparse: the listing's summaries are enough to remove by id (not sparse, the
        # SDK inspects every container it lists: three more daemon calls per set)
        victims = client.containers.list(
            all=True, filters={"label": f"{lbl.ATTEMPT}={self.request.attempt_id}"}, sparse=True
        )
        with ThreadPoolExecutor(max_workers=max(1, len(victims))) as pool:
            list(pool.map(remove_container, victims))
        for net in client.networks.list(filters={"label": f"{lbl.ATTEMPT}={self.request.attempt_id}"}):
            remove_network(net)


class AsyncSandbox:
    """`async with AsyncSandbox(request) as sb:`; blocking Docker work runs in threads.
    A started one is a `sandbox.provider.SandboxLease` (what `DockerProvider.checkout`
    hands out): its fields are its handle's."""

    def __init__(self, request: SandboxRequest):
        self.sandbox = Sandbox(request)
        self._started = False
        # With a reaper (sandbox.reaper), leaving the block hands the set over for
        # removal in the background instead of waiting for Docker.
        self.reaper: Reaper | None = None

    @classmethod
    def adopt(cls, sandbox: Sandbox) -> AsyncSandbox:
        """Wrap an already started sandbox (e.g. one from a pool)."""
        wrapper = cls(sandbox.request)
        wrapper.sandbox = sandbox
        wrapper._started = True
        return wrapper

    @property
    def handle(self) -> AttemptHandle:
        if self.sandbox.handle is None:
            raise SandboxError("sandbox not started")
        return self.sandbox.handle

    @property
    def servers(self) -> Mapping[str, str]:
        return self.handle.servers

    @property
    def timings(self) -> Mapping[str, float]:
        return self.handle.timings

    def admin_dsn(self, domain: str) -> str:
        return self.handle.pg.admin_dsn(domain)

    @property
    def server_headers(self) -> Mapping[str, str]:
        return self.handle.server_headers

    @property
    def interface(self) -> str | None:
        return bridge_name(self.handle.attempt_id)

    @property
    def containers(self) -> Mapping[str, str]:
        return self.handle.containers

    @property
    def network(self) -> str | None:
        return self.handle.network

    @property
    def tools(self) -> Mapping[str, list[dict[str, Any]]]:
        return self.handle.tools

    async def prepared_states(self, fingerprint: str) -> Mapping[str, Any] | None:
        return await asyncio.to_thread(self.sandbox.prepared_states, fingerprint)

    async def close(self) -> None:
        await self.__aexit__(None, None, None)

    async def __aenter__(self) -> AsyncSandbox:
        if self._started:
            return self
        try:
            await asyncio.to_thread(self.sandbox.start)
        except BaseException:
            # Cancellation (Ctrl-C in an event loop) must not leak what the thread created.
            await asyncio.shield(asyncio.to_thread(self.sandbox.close))
            raise
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self.reaper is not None:
            await asyncio.shield(self.reaper.release(self.sandbox))
            return
        await asyncio.shield(asyncio.to_thread(self.sandbox.close))


def _image_gone(tag: str) -> bool:
    try:
        docker_client().images.get(tag)
    except docker.errors.ImageNotFound:
        return True
    except docker.errors.APIError:
        return False
    return False
