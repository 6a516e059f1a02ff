"""What the samples of one Inspect task share, as `tbx env serve`'s host does for its
episodes: the loaded benchmark, the DockerProvider with a warm pool per domain (its
spares seeded ahead for the selected tasks, round-robin: Inspect's epoch-by-epoch order), the in-process tool proxy and
the golden store. `task_init` starts one per configuration, `task_cleanup` closes it;
the golden end states and rubrics stay here, on the evaluator's side.
"""

from __future__ import annotations

import asyncio
import functools
import itertools
import os
from collections import defaultdict
from pathlib import Path

from bench.dataset import Benchmark, Task, load_benchmark
from bench.prepare import task_preparation
from bench.run.attempt import AttemptSpec, attempt_spec
from bench.run.golden import GoldenStore
from bench.run.held import HeldAttempt
from sandbox import DockerProvider, Limits, ProxyServer, SandboxRequest, new_id, sweep
from sandbox.provider import Upcoming
from tbx.config import TbxConfig

AGENT_NAME = "inspect"  # the attempts' `agent`
PLAN_AHEAD = 1_000  # planned checkouts per domain (lazy preparers: cheap to hold)


def load(config: TbxConfig) -> tuple[Benchmark, list[Task]]:
    """The benchmark and its selected tasks (`config.tasks`, else the release's, in order);
    an unknown task id is a ValueError naming it."""
    bench = load_benchmark(Path(config.dataset), release=config.release)
    if config.tasks is None:
        return bench, list(bench.tasks)
    wanted = set(config.tasks)
    unknown = wanted - {t.id for t in bench.tasks} - {t.uid for t in bench.tasks}
    if unknown:
        raise ValueError(
            f"unknown task(s) in {bench.root}: {', '.join(sorted(unknown))} (`tbx tasks list` shows them)"
        )
    return bench, [t for t in bench.tasks if t.id in wanted or t.uid in wanted]


class TaskHost:
    """One configuration's shared parts (see the module doc)."""

    def __init__(self, config: TbxConfig):
        self.config = config
        self.bench, tasks = load(config)
        self.tasks = {t.id: t for t in tasks}
        self.run_id = new_id("inspect")
        self.limits = Limits(runtime=config.runtime)
        self.golden = GoldenStore(self.bench, config.golden_cache, runtime=config.runtime, run_id=self.run_id)
        self.warm = config.warm if config.warm is not None else max(1, os.cpu_count() or 1)
        self.provider: DockerProvider | None = None
        self.proxy: ProxyServer | None = None
        self._repeats: dict[str, itertools.count[int]] = defaultdict(itertools.count)
        self._specs: dict[str, AttemptSpec] = {}

    async def start(self) -> None:
        """Tool proxy, provider (stale leftovers swept, images resolved) and warm pools."""
        self.proxy = ProxyServer(call_timeout=self.config.call_timeout).start()
        domains = sorted({t.domain for t in self.tasks.values()})
        provider = DockerProvider(warm=self.warm)
        # Inspect runs the samples epoch by epoch in dataset order: per domain, the selected
        # tasks round-robin are the checkouts to come, each a hand-over of a spare seeded for it.
        provider.plan({}, self._plan_ahead(domains))
        await provider.start(self.run_id)
        self.provider = provider
        for domain in domains:
            await provider.warm_up(SandboxRequest(domains=[domain], limits=self.limits, run_id=self.run_id))

    def _plan_ahead(self, domains: list[str]) -> list[Upcoming]:
        upcoming: list[Upcoming] = []
        for domain in domains:
            served = [t for t in self.tasks.values() if t.domain == domain]
            prepares = [
                Upcoming([domain], functools.partial(task_preparation, self.bench, t)) for t in served
            ]
            upcoming += [prepares[i % len(prepares)] for i in range(PLAN_AHEAD)]
        return upcoming

    async def close(self) -> None:
        try:
            if self.provider is not None:
                await self.provider.close()
        finally:
            if self.proxy is not None:
                self.proxy.close()
            await asyncio.to_thread(sweep, self.run_id)  # golden replays' sets too

    def task(self, task_id: str) -> Task:
        try:
            return self.tasks[task_id]
        except KeyError:
            raise ValueError(
                f"task {task_id!r} is not among this eval's tasks of {self.bench.root}"
            ) from None

    async def spec(self, task: Task) -> AttemptSpec:
        """A fresh attempt of `task` (the next repeat of it in this eval): built once per
        task, off the event loop, and copied (its preparation shared)."""
        template = self._specs.get(task.id)
        if template is None:
            assert self.provider is not None, "the host is not started"
            build = functools.partial(
                attempt_spec,
                self.bench,
                task,
                0,
                run_id=self.run_id,
                attempt_id="template",
                agent=AGENT_NAME,
                images=dict(self.provider.images),
                wall_clock=self.config.wall_clock,
                limits=self.limits,
                brief=False,
            )
            template = self._specs[task.id] = await asyncio.to_thread(_prepared, build)
        repeat = next(self._repeats[task.id])
        attempt_id = new_id(f"{task.uid[:24]}-r{repeat}")
        return template.model_copy(update={"attempt_id": attempt_id, "repeat": repeat})

    async def open(self, task: Task) -> HeldAttempt:
        """`task`'s attempt, open: checked out, seeded, registered with the tool proxy."""
        assert self.provider is not None and self.proxy is not None, "the host is not started"
        held = HeldAttempt(await self.spec(task), self.provider, self.proxy)
        await held.open()
        return held


def _prepared(build: functools.partial[AttemptSpec]) -> AttemptSpec:
    spec = build()
    spec.preparation().fingerprint()
    return spec
