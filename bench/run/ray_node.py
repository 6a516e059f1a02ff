"""The node side of `tbx run --ray`: what runs on every cluster node.

`NodeRunner` is the body of one long-lived Ray actor per node (bench.run.ray_executor
wraps it with `ray.remote` and pins it to its node). It owns what must be near the
sandboxes: the node's `DockerProvider` (its warm pool, its Docker daemon), the tool
proxy on the node's 127.0.0.1 and the model clients, i.e. the `LocalExecutor` a local
run uses. Specs arrive as JSON and outcomes leave as JSON. A spec carries everything
its attempt needs (seed rows, policy documents, tool policy, the task's brief:
bench.rollout.brief), so the node never opens a dataset and needs none; nothing golden
is sent here but the marked script of the agents that replay the golden calls
(oracle, chaos).

`run_on_node` is the Ray task an attempt is: Ray places it on a node with a free
`tbx_attempt` unit (the node's capacity, a custom resource), and it hands the spec to
that node's actor. Holding the unit while the actor works is what makes Ray, not tbx,
the scheduler.

Model API keys come as the actor's constructor argument (a mapping of the config's
environment variable names to values) and are put into this process's environment, so
they appear in no log, spec, result or Ray runtime-env record.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from pathlib import Path
from typing import Any

from bench.llm.config import ModelsConfig
from bench.run.attempt import AttemptSpec
from bench.run.executor import LocalExecutor
from sandbox import NODE_ENV

RESOURCE = "tbx_attempt"  # a node's attempt slots (`ray start --resources '{"tbx_attempt": N}'`)
NAMESPACE = "tbx"


def actor_name(run_id: str, node_id: str) -> str:
    return f"tbx-node-{run_id}-{node_id}"


class NodeRunner:
    """One node's attempts (see the module doc); async methods, many attempts at once."""

    def __init__(
        self, run_id: str, node_id: str, warm: int, config_json: str | None, secrets: dict[str, str]
    ):
        from sandbox import DockerProvider

        os.environ.update(secrets)
        os.environ[NODE_ENV] = node_id  # every container and network started here carries tbx.node
        self.node_id = node_id
        config = ModelsConfig.model_validate_json(config_json) if config_json else None
        self.executor = LocalExecutor(DockerProvider(warm=warm), config)
        self.running: set[asyncio.Task[Any]] = set()
        self.done = 0
        self.opened = False

    async def start(self, run_id: str) -> dict[str, Any]:
        """Sweep this node's orphans (a killed run's, a lost node's), resolve its images."""
        await self.executor.start(run_id)
        return {
            "node": self.node_id,
            "images": self.executor.sandboxes.images,
            "digests": await self.executor.sandboxes.image_digests(),
        }

    def plan(self, budget: dict[str, int]) -> None:
        self.executor.sandboxes.plan(budget)

    async def open(self) -> None:
        if not self.opened:
            await self.executor.open()
            self.opened = True

    async def execute(self, spec_json: str) -> tuple[float, str]:
        """(when it started here, wall clock; the outcome's JSON)."""
        started = time.time()
        spec = AttemptSpec.model_validate_json(spec_json)
        task = asyncio.ensure_future(self.executor.execute(spec))
        self.running.add(task)
        try:
            outcome = await task
        finally:
            self.running.discard(task)
            self.done += 1
        return started, outcome.model_dump_json()

    async def ping(self) -> None:
        """Raise unless this node's Docker daemon answers (the driver's `ping`)."""
        await self.executor.sandboxes.ping()

    async def recovered(self) -> None:
        """This node's daemon answers again after an outage: drop what did not survive it."""
        await self.executor.sandboxes.recovered()

    def stats(self) -> dict[str, Any]:
        return {
            "node": self.node_id,
            "running": len(self.running),
            "done": self.done,
            "alive": self.executor.sandboxes.alive,
            "warm": self.executor.sandboxes.warm,
        }

    async def close(self, run_id: str) -> dict[str, Any]:
        """Stop the attempts still running here (a stopped driver) and remove every
        container and network of the run on this node."""
        for task in list(self.running):
            task.cancel()
        for task in list(self.running):
            with contextlib.suppress(BaseException):
                await task
        await self.executor.close(run_id)
        return self.stats()


def run_on_node(run_id: str, spec_json: str) -> tuple[str, float, str]:
    """One attempt, wherever Ray placed it: (node id, start time, outcome JSON)."""
    import ray

    node_id = ray.get_runtime_context().get_node_id()
    actor = ray.get_actor(actor_name(run_id, node_id), namespace=NAMESPACE)
    result: Any = ray.get(actor.execute.remote(spec_json))
    return node_id, float(result[0]), str(result[1])


def admitted_slots(dataset: str, domains: list[str] | None = None, model_agent: bool = False) -> int:
    """The `tbx_attempt` slots this machine admits: the container sets that fit in its
    available memory by the measured use of one set per domain (bench.run.admission,
    cached per image build), for built-in agents at most one per core. An operator's
    sizing aid: it replays golden calls, so it needs a copy of the dataset (at any
    path) where it runs; the run itself does not."""
    from bench.dataset import load_benchmark
    from bench.run.admission import set_usage
    from sandbox import available_memory, resolve_images, sets_that_fit

    bench = load_benchmark(Path(dataset), strict=False)
    tasks = [t for t in bench.tasks if not domains or t.domain in domains]
    usage = asyncio.run(set_usage(bench, tasks, resolve_images(True)))
    fits = sets_that_fit(max(u.need_bytes for u in usage.values()), available_memory())
    return int(fits if model_agent else min(fits, os.cpu_count() or 1))


def main() -> None:
    """`python -m bench.run.ray_node --dataset DIR [--domain D] [--model-agent]`: the slots to give
    `ray start --resources '{"tbx_attempt": N}'` on this node."""
    import argparse

    ap = argparse.ArgumentParser(description=main.__doc__)
    ap.add_argument("--dataset", required=True)
    ap.add_argument("--domain", action="append")
    ap.add_argument("--model-agent", action="store_true", help="attempts wait on a model: memory-bound")
    args = ap.parse_args()
    print(admitted_slots(args.dataset, args.domain, args.model_agent))


if __name__ == "__main__":
    main()
