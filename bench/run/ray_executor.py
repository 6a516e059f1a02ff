"""`tbx run --ray auto|ADDRESS`: the run's attempts on a Ray cluster's nodes.

The driver (this process: the coordinator, the golden end states, the judge)
connects to the cluster, starts one `bench.run.ray_node.NodeRunner` actor on
every node that advertises `tbx_attempt` slots, and checks that every node runs
exactly the image builds the driver records in the manifest. Each attempt is
then a Ray task needing one `tbx_attempt` unit: Ray picks the node, the task
hands the spec (JSON: seed rows, documents, the task's brief; no golden state or
rubric, API keys as variable names) to that node's actor, which needs no copy of
the dataset, and the outcome comes back as JSON to be graded here.

A node lost mid-attempt (its actor or worker died, the node went away) turns the
attempt into a system error of kind `NodeLost`, which the coordinator's
RetryPolicy retries; Ray itself never retries (max_retries=0), so an attempt
never runs twice behind the coordinator's back. `close` stops every remote
attempt and has every node remove the run's containers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import os
import socket
import time
from typing import TYPE_CHECKING, Any

from bench.run.attempt import AttemptFailure, AttemptOutcome, AttemptSpec
from bench.run.causes import fault_of
from bench.run.errors import RunError
from bench.run.executor import Sandboxes
from bench.run.ray_node import NAMESPACE, RESOURCE, NodeRunner, actor_name, run_on_node
from sandbox import OTHER_FAULT

if TYPE_CHECKING:
    from collections.abc import Sequence

    from bench.llm.config import ModelsConfig
    from sandbox import Upcoming

log = logging.getLogger(__name__)

CONNECT_TIMEOUT = 10.0  # seconds an address gets to answer before the run refuses to start
START_TIMEOUT = 300.0  # a node's actor: process start, sweep, image check
CLOSE_TIMEOUT = 120.0
PING_TIMEOUT = 10.0  # seconds a node's actor gets to report on its daemon
NODE_LOST = "NodeLost"

__all__ = ["NODE_LOST", "ClusterError", "RayExecutor", "check_images", "node_lost_reason"]


class ClusterError(RunError):
    """The cluster cannot run this run (unreachable, no slots, mixed image builds)."""


def _ray() -> Any:
    try:
        import ray
    except ImportError as exc:
        raise ClusterError(
            "tbx run --ray: Ray is not installed; install the extra: pip install 'tbx[ray]'"
        ) from exc
    return ray


def _probe(address: str, timeout: float) -> None:
    """A TCP connect to host:port, so a dead address fails in seconds, not after Ray's own retries."""
    host, _, port = address.rpartition(":")
    if host.startswith("ray://"):
        host = host[len("ray://") :]
    if not host or not port.isdigit():
        raise ClusterError(f"tbx run --ray: {address!r} is not auto or HOST:PORT of a Ray head")
    try:
        with socket.create_connection((host, int(port)), timeout=timeout):
            pass
    except OSError as exc:
        raise ClusterError(
            f"tbx run --ray: the Ray cluster at {address} does not answer ({exc}); "
            "is the head running (`ray start --head`) and the address right?"
        ) from exc


def connect(address: str, timeout: float = CONNECT_TIMEOUT) -> None:
    """Connect this process to the cluster (idempotent); a clear ClusterError otherwise."""
    ray = _ray()
    if ray.is_initialized():
        return
    if address != "auto":
        _probe(address, timeout)
    try:
        ray.init(
            address=address,
            namespace=NAMESPACE,
            log_to_driver=False,
            logging_level=logging.WARNING,
            include_dashboard=False,
        )
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise ClusterError(f"tbx run --ray: cannot connect to the Ray cluster at {address}: {exc}") from exc


def cluster_slots() -> int:
    """`tbx_attempt` slots of the nodes alive (the run's default concurrency)."""
    ray = _ray()
    return int(ray.cluster_resources().get(RESOURCE, 0))


def check_images(driver: dict[str, str], nodes: dict[str, dict[str, Any]]) -> None:
    """Every node must hold exactly the driver's image digests (the manifest's):
    one run scored on two builds would mix them in one score."""
    problems = []
    for node, report in sorted(nodes.items()):
        digests = report.get("digests", {})
        for role, digest in sorted(driver.items()):
            theirs = digests.get(role)
            if theirs != digest:
                problems.append(
                    f"node {node[:12]} image {role}: {theirs or 'missing'} (the driver has {digest})"
                )
    if problems:
        raise ClusterError(
            "tbx run --ray: refusing to mix image builds: "
            + "; ".join(problems)
            + ". Build the images on that node (`tbx images build`) from the same commit, "
            "or ship them (`docker save` | `docker load`)"
        )


def node_lost_reason(exc: BaseException) -> str | None:
    """The reason an error from Ray means the attempt's node (or its worker) went
    away, else None."""
    ray = _ray()
    lost = (
        ray.exceptions.RayActorError,  # ActorDiedError, ActorUnavailableError
        ray.exceptions.WorkerCrashedError,
        ray.exceptions.NodeDiedError,
        ray.exceptions.ObjectLostError,  # OwnerDiedError, ObjectReconstructionFailedError
        ray.exceptions.LocalRayletDiedError,
    )
    seen: BaseException | None = exc
    while seen is not None:
        if isinstance(seen, lost):
            first = str(seen).strip().splitlines()[0] if str(seen).strip() else ""
            return f"{type(seen).__name__}: {first[:300]}"
        cause = getattr(seen, "cause", None)
        seen = cause if isinstance(cause, BaseException) and cause is not seen else seen.__cause__
    return None


def _secrets(config: ModelsConfig | None) -> dict[str, str]:
    """The model keys the nodes need, from this process's environment, by the
    variable names the config gives (a key written literally in the config stays here)."""
    if config is None:
        return {}
    out = {}
    for role in (config.agent, config.user):
        name = getattr(role, "api_key_env", None) if role is not None else None
        if name and name in os.environ:
            out[name] = os.environ[name]
    return out


class RayExecutor:
    """AttemptExecutor over a Ray cluster (see the module doc)."""

    def __init__(
        self,
        address: str = "auto",
        *,
        config: ModelsConfig | None = None,
        warm: int = 0,
        connect_timeout: float = CONNECT_TIMEOUT,
    ):
        self.address = address
        self.config = config
        self.warm_size = warm
        self.connect_timeout = connect_timeout
        self.run_id: str | None = None
        self.actors: dict[str, Any] = {}  # node id -> NodeRunner handle
        self.capacity: dict[str, float] = {}  # node id -> tbx_attempt slots
        self.image_tags: dict[str, str] = {}
        self.digests: dict[str, str] = {}
        self.inflight: set[Any] = set()
        self.lost: set[str] = set()
        self.stats: dict[str, dict[str, Any]] = {}  # node id -> its actor's last stats()
        self.done_per_node: dict[str, int] = {}
        self.latencies: list[float] = []  # submit -> the node's actor began, seconds
        self._poller: asyncio.Task[None] | None = None
        self._remote: Any = None
        self.sandboxes: Sandboxes = ClusterSandboxes(self)

    # ---- AttemptExecutor
    async def start(self, run_id: str) -> None:
        self.run_id = run_id
        ray = _ray()
        await asyncio.to_thread(connect, self.address, self.connect_timeout)
        self.image_tags, self.digests = await asyncio.to_thread(_driver_images)
        nodes = {
            n["NodeID"]: n["Resources"].get(RESOURCE, 0)
            for n in ray.nodes()
            if n.get("Alive") and n["Resources"].get(RESOURCE, 0) > 0
        }
        if not nodes:
            raise ClusterError(
                f"tbx run --ray: no node of the cluster at {self.address} offers {RESOURCE} slots; "
                f"start the nodes with `ray start ... --resources '{{\"{RESOURCE}\": N}}'` (docs/scale-out.md)"
            )
        self.capacity = nodes
        from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

        actor_cls = ray.remote(NodeRunner)
        config_json = None if self.config is None else self._public_config()
        secrets = _secrets(self.config)
        for node in nodes:
            self.actors[node] = actor_cls.options(
                name=actor_name(run_id, node),
                namespace=NAMESPACE,
                num_cpus=0,
                max_restarts=0,
                max_concurrency=1000,
                scheduling_strategy=NodeAffinitySchedulingStrategy(node, soft=False),
            ).remote(run_id, node, self.warm_size, config_json, secrets)
        self._remote = ray.remote(run_on_node).options(
            num_cpus=0, resources={RESOURCE: 1}, max_retries=0, retry_exceptions=False
        )
        refs = {node: a.start.remote(run_id) for node, a in self.actors.items()}
        reports: dict[str, dict[str, Any]] = {}
        failures: dict[str, str] = {}
        for node, ref in refs.items():
            try:
                reports[node] = await asyncio.wait_for(ref, START_TIMEOUT)
            except Exception as exc:
                # That node's problem (it died, its daemon does not answer): the run goes
                # on with the others; Ray places no attempt on a node that is gone.
                failures[node] = str(exc).splitlines()[0][:300]
                log.warning("tbx run --ray: node %s could not start, running without it: %s", node[:12], exc)
        if not reports:
            await self._kill_actors()
            detail = "; ".join(f"node {n[:12]}: {why}" for n, why in failures.items())
            raise ClusterError(f"tbx run --ray: no node of the cluster could start: {detail}")
        for node in failures:
            self.lost.add(node)
            with contextlib.suppress(Exception):
                ray.kill(self.actors.pop(node), no_restart=True)
            self.capacity.pop(node, None)
        try:
            check_images(self.digests, reports)
        except ClusterError:
            await self._kill_actors()
            raise

    def _public_config(self) -> str:
        """The agent and user roles without keys (the judge stays with the driver)."""
        assert self.config is not None
        return json.dumps({k: v for k, v in self.config.public_dict().items() if k != "judge"})

    async def open(self) -> None:
        await asyncio.gather(*(a.open.remote() for a in self.actors.values()))
        self._poller = asyncio.ensure_future(self._poll())

    async def execute(self, spec: AttemptSpec) -> AttemptOutcome:
        assert self.run_id is not None and self._remote is not None, "start() first"
        submitted = time.time()
        ref = self._remote.remote(self.run_id, spec.model_dump_json())
        self.inflight.add(ref)
        try:
            node, started, outcome_json = await ref
        except asyncio.CancelledError:
            _ray().cancel(ref, force=False)
            raise
        except Exception as exc:
            return self._failed(spec, exc)
        finally:
            self.inflight.discard(ref)
        outcome = AttemptOutcome.model_validate_json(outcome_json)
        latency = max(0.0, started - submitted)
        self.latencies.append(latency)
        outcome.timings["ray_schedule"] = latency
        self.done_per_node[node] = self.done_per_node.get(node, 0) + 1
        outcome.node = node
        return outcome

    def _failed(self, spec: AttemptSpec, exc: BaseException) -> AttemptOutcome:
        reason = node_lost_reason(exc)
        if reason is not None:
            # counted `other`, as it always was (a lost node is not its Docker daemon)
            failure = AttemptFailure(kind=NODE_LOST, message=f"node lost: {reason}", fault=OTHER_FAULT)
        else:
            cause = getattr(exc, "cause", None) or exc  # Ray's error wraps the node's
            failure = AttemptFailure(
                kind=type(cause).__name__, message=str(cause)[:2000], fault=fault_of(cause)
            )
        return AttemptOutcome.of(spec, system_error=failure)

    def live_nodes(self) -> list[str]:
        return [n for n in self.actors if n not in self.lost]

    async def on_nodes(self, nodes: list[str], method: str) -> list[Any]:
        """`method` of these nodes' actors, at once: each one's result or exception."""

        async def one(node: str) -> Any:
            return await asyncio.wait_for(getattr(self.actors[node], method).remote(), PING_TIMEOUT)

        return await asyncio.gather(*(one(n) for n in nodes), return_exceptions=True)

    async def close(self, run_id: str) -> None:
        ray = _ray()
        if self._poller is not None:
            self._poller.cancel()
        for ref in list(self.inflight):
            with contextlib.suppress(Exception):
                ray.cancel(ref, force=False)
        closes = {node: a.close.remote(run_id) for node, a in self.actors.items() if node not in self.lost}
        for node, ref in closes.items():
            try:
                await asyncio.wait_for(ref, CLOSE_TIMEOUT)
            except Exception as exc:  # a node lost at the end: its daemon sweeps when it is back
                log.warning("tbx run --ray: node %s did not close cleanly: %s", node[:12], exc)
        await self._kill_actors()

    async def _kill_actors(self) -> None:
        ray = _ray()
        for a in self.actors.values():
            with contextlib.suppress(Exception):
                ray.kill(a, no_restart=True)
        self.actors = {}

    async def _poll(self) -> None:
        """Every node's counters for the progress view; a node whose actor is gone is lost."""
        while True:
            for node, a in list(self.actors.items()):
                if node in self.lost:
                    continue
                try:
                    self.stats[node] = await asyncio.wait_for(a.stats.remote(), 10.0)
                except asyncio.CancelledError:
                    raise
                except Exception as exc:
                    if node_lost_reason(exc) is not None:
                        self.lost.add(node)
                        self.stats.pop(node, None)
            await asyncio.sleep(1.0)

    # ---- progress view
    @property
    def nodes(self) -> dict[str, dict[str, int]]:
        """Node (short id) -> attempts running and done there, for the nodes alive."""
        return {
            node[:8]: {
                "running": int(self.stats.get(node, {}).get("running", 0)),
                "done": self.done_per_node.get(node, 0),
            }
            for node in self.capacity
            if node not in self.lost
        }

    @property
    def nodes_alive(self) -> int:
        return len([n for n in self.capacity if n not in self.lost])


class ClusterSandboxes:
    """The run's sandboxes over every node (the executor's `sandboxes`): the driver's
    image build (each node's is checked equal at start), the plan shared out to the
    nodes' providers, their counters summed."""

    def __init__(self, cluster: RayExecutor):
        self.cluster = cluster

    @property
    def images(self) -> dict[str, str]:
        return dict(self.cluster.image_tags)

    async def image_digests(self) -> dict[str, str]:
        return dict(self.cluster.digests)

    def plan(self, budget: dict[str, int], upcoming: Sequence[Upcoming] | None = None) -> None:
        # Each node's warm pool boots for its share of the attempts, not all of them.
        # (`upcoming` is not passed on: which node takes which attempt is Ray's choice,
        # so a node cannot prepare ahead for a specific one; its pool boots plain spares.)
        share = {d: math.ceil(n / max(1, len(self.cluster.actors))) for d, n in budget.items()}
        for a in self.cluster.actors.values():
            a.plan.remote(share)

    async def ping(self) -> None:
        """Raise unless every live node's Docker daemon answers: while one restarts,
        attempts Ray places there would fail in milliseconds and use up their retries,
        so the coordinator holds new tries (bench.run.daemon) until it is back. A node
        whose actor is gone is lost, not waited for."""
        down = []
        nodes = self.cluster.live_nodes()
        for node, answer in zip(nodes, await self.cluster.on_nodes(nodes, "ping"), strict=True):
            if isinstance(answer, BaseException):
                if node_lost_reason(answer) is not None:
                    self.cluster.lost.add(node)
                    continue
                first = str(answer).strip().splitlines()[0][:300] if str(answer).strip() else ""
                down.append(f"node {node[:12]}: {type(answer).__name__}: {first}")
        if down:
            raise RuntimeError("the Docker daemon of a node does not answer: " + "; ".join(down))

    async def recovered(self) -> None:
        """Every node drops what did not survive its daemon's outage."""
        nodes = self.cluster.live_nodes()
        for node, answer in zip(nodes, await self.cluster.on_nodes(nodes, "recovered"), strict=True):
            if isinstance(answer, BaseException):
                log.warning(
                    "tbx run --ray: node %s could not clean up after an outage: %s", node[:12], answer
                )

    @property
    def alive(self) -> int:
        return sum(int(s.get("alive", 0)) for s in self.cluster.stats.values())

    @property
    def warm(self) -> int:
        return sum(int(s.get("warm", 0)) for s in self.cluster.stats.values())


def _driver_images() -> tuple[dict[str, str], dict[str, str]]:
    """The image tags and digests the manifest records: this machine's build."""
    from sandbox import image_digests, resolve_images

    images = resolve_images(True)
    return images, image_digests(images)
