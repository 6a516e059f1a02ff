"""What every episode of one `tbx env serve` shares.

The dataset and models config (checked once), the task selection, the
sandbox provider (a `DockerProvider` with a warm pool per served domain, the
one `tbx run` uses), the in-process tool proxy, the simulated user's
model client, the golden store, the rubric judge and the run output, which
the episodes use exactly as `tbx run`'s coordinator does (bench.run.grading,
bench.run.recording), so the golden end states and rubrics stay in this
process. Start-up that needs Docker (image
tags, the manifest, the pools) is retried in the background until it works:
the server answers `/ready` with what is still missing meanwhile.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from bench.dataset import Benchmark, Task
from bench.defaults import CALL_TIMEOUT, START_TIMEOUT, TIMEOUTS, WALL_CLOCK, Timeouts
from bench.env.endpoint_probe import check_roles, manifest_servers
from bench.env.protocol import EnvError, ErrorCode
from bench.evaluator.functions import FunctionRunner
from bench.llm.client import LLMClient
from bench.llm.config import ModelsConfig, ModelsConfigError
from bench.llm.judge import LazyRubricJudge
from bench.prepare import task_preparation
from bench.rollout.tools import apply_overrides, mcp_tool_to_openai
from bench.run.attempt import AttemptSpec, attempt_spec
from bench.run.errors import BundleChanged
from bench.run.golden import GoldenStore
from bench.run.output import RunOutput, dataset_hash, write_manifest
from sandbox import (
    DockerProvider,
    ImageMissingError,
    Limits,
    ProxyServer,
    SandboxError,
    SandboxPool,
    SandboxRequest,
    Upcoming,
    image_digests,
    new_id,
    sweep,
)

log = logging.getLogger(__name__)

AGENT_NAME = "openenv"  # the `agent` of result rows and the manifest
BRING_UP_RETRY = 2.0  # seconds between start-up attempts while Docker or images are missing
WARM_TOTAL = 2  # sandboxes kept ready in all, by default (at most max_episodes), shared by domain
PLAN_AHEAD = 10_000  # planned checkouts per served domain (lazy preparers: cheap to hold)
# Served tasks (in list order) whose cached golden states are loaded at start-up; beyond
# that a long training list's are loaded by their first episode (memory, not speed).
GOLDEN_PRELOAD = 512
# Seconds from a hand-over to its replacement's boot: a group's resets (G at once) finish
# before the G replacements' boots take the process's CPU (SandboxPool.refill_delay).
REFILL_DELAY = 1.0
SERVER_PROBE_SECONDS = 10.0  # how long the manifest waits for the model servers' self-description


def warm_sizes(tasks: list[Task], max_episodes: int, warm: int | None) -> dict[str, int]:
    """Per domain, the sandboxes its pool keeps ready: `warm` each when given, else
    WARM_TOTAL (at most max_episodes) shared by the domains' shares of the served tasks."""
    counts: dict[str, int] = {}
    for t in tasks:
        counts[t.domain] = counts.get(t.domain, 0) + 1
    if warm is not None:
        return {d: warm for d in counts}
    total = min(WARM_TOTAL, max_episodes)
    return {d: max(1, round(total * n / len(tasks))) for d, n in counts.items()}


class EnvOptions(BaseModel):
    out: Path
    max_episodes: int = Field(default=4, ge=1)
    # booted sandboxes kept ready per served domain; None: sized from the served list (warm_sizes)
    warm: int | None = Field(default=None, ge=1)
    idle_timeout: float = Field(default=300.0, gt=0)  # an episode with no step for this long is torn down
    # MCP sessions playing no episode one client may hold (None: bench.env.sessions.default_per_client)
    sessions_per_client: int | None = Field(default=None, ge=1)
    wall_clock: float = Field(default=WALL_CLOCK, gt=0)  # per episode, as `tbx run --wall-clock`
    call_timeout: float = Field(default=CALL_TIMEOUT, gt=0)
    start_timeout: float = Field(default=START_TIMEOUT, gt=0)  # a sandbox boot, and a reset waiting for one
    runtime: str | None = None
    golden_cache: Path | None = None
    skip_rubrics: bool = False
    run_name: str | None = None

    @property
    def timeouts(self) -> Timeouts:
        """The served sandboxes' timeouts, the flags applied: a boot's is `start_timeout`, and
        a reset waits for its sandbox as a server's request does (SandboxTimeouts.serving)."""
        return TIMEOUTS.model_copy(
            update={"boot": self.start_timeout, "call": self.call_timeout, "wall_clock": self.wall_clock}
        ).serving()


def _with_preparation(build: Callable[[], AttemptSpec]) -> AttemptSpec:
    """`build()`'s spec with its sandbox preparation made (rows typed, fingerprint taken),
    so the copies for episodes share it instead of each making its own at reset."""
    spec = build()
    spec.preparation().fingerprint()
    return spec


class EnvHost:
    def __init__(self, bench: Benchmark, config: ModelsConfig, tasks: list[Task], opts: EnvOptions):
        self.bench = bench
        self.config = config
        self.opts = opts
        self.tasks = {t.id: t for t in tasks}
        self.by_uid = {t.uid: t for t in tasks}
        self.domains = sorted({t.domain for t in tasks})
        self.warm = warm_sizes(tasks, opts.max_episodes, opts.warm)
        # what a reset's `dataset` may say: the benchmark's directory name, or its release list's
        self.dataset_names = {bench.root.name, *([Path(bench.release).stem] if bench.release else [])}
        self.run_id = new_id("run")
        self.output = RunOutput(opts.out)
        self.golden = GoldenStore(bench, opts.golden_cache, runtime=opts.runtime, run_id=self.run_id)
        self.judge = LazyRubricJudge(config.judge) if config.judge is not None else None
        # Test functions (bench.evaluator), for tasks graded by one: an episode's reward is theirs.
        self.functions = (
            FunctionRunner(self.run_id, config.judge, concurrency=opts.max_episodes)
            if any(t.runs_function for t in tasks)
            else None
        )
        self.limits = Limits(runtime=opts.runtime)
        self.manifest: dict[str, Any] | None = None
        # Checkouts from the warm pools; a reset waits at most two boots (EnvOptions.timeouts).
        self.provider: DockerProvider | None = None
        self.proxy: ProxyServer | None = None
        self.user_client: LLMClient | None = None
        self.bring_up_error: str | None = "starting"
        self.fatal: str | None = None  # a start-up problem retrying cannot fix (the output directory)
        self.episodes: dict[str, Any] = {}  # episode id -> bench.env.episode.Episode, while it holds a slot
        self._repeats: dict[str, set[int]] = {}  # task -> repeats recorded or handed out
        # see attempt_spec: one build per task, shared by the resets that wait for it
        self._specs: dict[tuple[str, tuple[tuple[str, str], ...]], asyncio.Future[AttemptSpec]] = {}
        self._offered: dict[str, tuple[list[dict[str, Any]], list[dict[str, Any]]]] = {}  # offered_tools
        self._bring_up: asyncio.Task[None] | None = None
        self.config_problems = self._check_config()

    # ---- configuration ---------------------------------------------------------
    def _check_config(self) -> list[str]:
        problems = []
        if self.config.user is None:
            problems.append("the config has no `user` role (the simulated customer)")
        rubric_tasks = [t.id for t in self.tasks.values() if t.has_rubrics and not t.runs_function]
        if rubric_tasks and not self.opts.skip_rubrics and self.config.judge is None:
            problems.append(
                f"{len(rubric_tasks)} served task(s) have yes/no rubrics but the config has no `judge` "
                "role (add one, or serve with --skip-rubrics)"
            )
        for role in ("user", "judge"):
            cfg = getattr(self.config, role)
            if cfg is None:
                continue
            try:
                cfg.resolved_api_key()
            except ModelsConfigError as exc:
                problems.append(f"{role}: {exc}")
        return problems

    @property
    def images(self) -> dict[str, str]:
        return dict(self.provider.images) if self.provider is not None else {}

    @property
    def pools(self) -> dict[str, SandboxPool]:
        """Served domain -> its warm pool, once started (readiness)."""
        if self.provider is None:
            return {}
        return {",".join(shape.domains): pool for shape, pool in self.provider.pools.items()}

    # ---- lifecycle ---------------------------------------------------------------
    async def start(self) -> None:
        self.output.lock()
        self.output.repair()
        self.proxy = ProxyServer(call_timeout=self.opts.call_timeout).start()
        if self.config.user is not None and not self.config_problems:
            self.user_client = LLMClient(self.config.role("user"), role="user")
        self._bring_up = asyncio.create_task(self._bring_up_loop())

    async def _bring_up_loop(self) -> None:
        """Images -> manifest -> warm pools, retried until Docker and the images are there."""
        while True:
            try:
                if self.provider is None or not self.provider.images:
                    provider = DockerProvider(
                        warm=max(self.warm.values(), default=1),
                        sizes=self.warm,  # per served domain (warm_sizes)
                        timeouts=self.opts.timeouts,
                        refill_delay=REFILL_DELAY,
                    )
                    # Every domain's spares are seeded ahead for its served tasks, a round
                    # over them in list order, and a reset's replacement for the task it
                    # took (the likeliest next reset: a group's): a reset is a hand-over.
                    provider.plan({}, self._plan_ahead(), again=True)
                    await provider.start(self.run_id)  # stale leftovers swept, images resolved
                    if self.functions is not None:  # a missing evaluator image stops here, clearly
                        await asyncio.to_thread(lambda: self.functions.image if self.functions else None)
                    self.provider = provider
                if self.manifest is None:
                    servers = await self._model_servers()
                    self.manifest = await asyncio.to_thread(
                        self._write_manifest, self.provider.images, servers
                    )
                for domain in self.domains:
                    await self.provider.warm_up(
                        SandboxRequest(domains=[domain], limits=self.limits, run_id=self.run_id)
                    )
                self.bring_up_error = None
                # The served tasks' specs, built while the spares boot (a reset then only copies
                # one), and their cached golden states loaded (a reset's grading then waits for
                # none, and the resets of the first group do not load them at once).
                for i, task in enumerate(self.tasks.values()):
                    with contextlib.suppress(Exception):  # a reset of it meets the error itself
                        await self.attempt_spec(task, 0, "ahead")
                        if i < GOLDEN_PRELOAD:
                            await self.golden.preload(task)
                return
            except (BundleChanged, ImageMissingError) as exc:  # waiting cannot cure these
                self.fatal = str(exc)
                self.bring_up_error = self.fatal
                return
            except (SandboxError, OSError) as exc:
                self.bring_up_error = str(exc)
            except Exception as exc:  # keep retrying; /ready shows it
                log.exception("env server start-up failed")
                self.bring_up_error = f"{exc.__class__.__name__}: {exc}"
            await asyncio.sleep(BRING_UP_RETRY)

    def _plan_ahead(self) -> list[Upcoming]:
        """Per domain, PLAN_AHEAD checkouts: its served tasks round-robin in list order
        (lazy preparers: cheap to hold; the pool takes them as it boots spares)."""
        upcoming: list[Upcoming] = []
        for domain in self.domains:
            served = [t for t in self.tasks.values() if t.domain == domain]
            prepares = [
                Upcoming([domain], functools.partial(task_preparation, self.bench, t)) for t in served
            ]
            upcoming += [prepares[i % len(prepares)] for i in range(PLAN_AHEAD)]
        return upcoming

    async def _model_servers(self) -> dict[str, Any]:
        """What the user and judge servers say of themselves (the manifest's `model_servers`),
        as far as they answer within SERVER_PROBE_SECONDS: a busy one is recorded as unknown."""
        roles = {r: c for r in ("user", "judge") if (c := getattr(self.config, r)) is not None}
        try:
            probes = await asyncio.wait_for(check_roles(roles), SERVER_PROBE_SECONDS)
        except TimeoutError:
            return {}
        return manifest_servers(probes)

    def _write_manifest(self, images: dict[str, str], model_servers: dict[str, Any]) -> dict[str, Any]:
        return write_manifest(
            self.opts.out,
            self.bench,
            agent=AGENT_NAME,
            repeats=1,
            run_name=self.opts.run_name or AGENT_NAME,
            images=images,
            digests=image_digests(images),
            config=self.config,
            run_id=self.run_id,
            data_hash=dataset_hash(self.bench.root),
            model_servers=model_servers,
        )

    async def close(self) -> None:
        for episode in list(self.episodes.values()):
            with contextlib.suppress(Exception):
                await episode.close("the server is shutting down")
        if self._bring_up is not None:
            self._bring_up.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await self._bring_up
        try:
            if self.provider is not None:
                await self.provider.close()
        finally:
            if self.proxy is not None:
                self.proxy.close()
            if self.user_client is not None:
                await self.user_client.aclose()
            if self.judge is not None:
                await self.judge.aclose()
            if self.functions is not None:
                await self.functions.aclose()
            self.output.unlock()
            # also what golden replays of this run left
            await asyncio.to_thread(sweep, self.run_id)

    # ---- episodes --------------------------------------------------------------
    def task(self, test_uid: str) -> Task:
        task = self.tasks.get(test_uid) or self.by_uid.get(test_uid)
        if task is None:
            known = len(self.tasks)
            raise EnvError(
                ErrorCode.VALIDATION_ERROR,
                f"unknown task {test_uid[:200]!r}: this server serves {known} task(s) of {self.bench.root.name} "
                "(`tbx tasks list` shows their ids)",
            )
        return task

    async def attempt_spec(self, task: Task, repeat: int, attempt_id: str) -> AttemptSpec:
        """The spec of an episode of `task`. Everything in it but the ids depends on the task
        (seed rows, documents, tool policy; no brief: the agent is remote and this host runs
        the conversation itself), so it is built once per task (and image set), off the event
        loop, and copied for each episode (its preparation shared: `AttemptSpec.preparation`)."""
        key = (task.id, tuple(sorted(self.images.items())))
        building = self._specs.get(key)
        if building is None:
            build = functools.partial(
                attempt_spec,
                self.bench,
                task,
                0,
                run_id=self.run_id,
                attempt_id="template",
                agent=AGENT_NAME,
                images=self.images,
                wall_clock=self.opts.wall_clock,
                limits=self.limits,
                brief=False,
            )
            building = self._specs[key] = asyncio.ensure_future(asyncio.to_thread(_with_preparation, build))
        try:
            template = await asyncio.shield(building)
        except Exception:
            if self._specs.get(key) is building:
                del self._specs[key]  # the next reset tries again (and meets the error itself)
            raise
        return template.model_copy(update={"attempt_id": attempt_id, "repeat": repeat})

    def offered_tools(self, task: Task, listing: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """The tools a reset of `task` shows (OpenAI function form, the scenario's overrides
        applied) for its registration's `listing`: built once per task and listing, which
        every sandbox of the same images shares. Read only: episodes share the list."""
        cached = self._offered.get(task.id)
        if cached is None or cached[0] != listing:
            tools = apply_overrides(
                [mcp_tool_to_openai(x) for x in listing], self.bench.scenario_of(task).tools
            )
            cached = self._offered[task.id] = (listing, tools)
        return cached[1]

    def next_repeat(self, task: Task, wanted: int | None) -> int:
        """`wanted` unless it is recorded or handed out already (refused: a repeat is one
        attempt), else one past the highest repeat of the task recorded or handed out so far."""
        used = self._repeats.get(task.id)
        if used is None:
            recorded = self.output.done(retry_errors=False)
            used = self._repeats[task.id] = {r for t, r in recorded if t == task.id}
        if wanted is not None:
            if wanted in used:
                raise EnvError(
                    ErrorCode.VALIDATION_ERROR,
                    f"repeat {wanted} of {task.id} is recorded or running already; "
                    "omit `repeat` to get the next unused one",
                    409,
                )
            used.add(wanted)
            return wanted
        repeat = max(used, default=-1) + 1
        used.add(repeat)
        return repeat

    def give_back_repeat(self, task: Task, repeat: int) -> None:
        """`repeat` of `task` was handed out to a reset that never started an attempt (refused
        at capacity): a later reset may have it (the next unused one again, or by name)."""
        self._repeats.get(task.id, set()).discard(repeat)

    def check_capacity(self) -> None:
        if self.fatal is not None:
            raise EnvError(ErrorCode.FACTORY_ERROR, f"the server cannot make episodes: {self.fatal}", 503)
        if self.bring_up_error is not None:
            raise EnvError(
                ErrorCode.EXECUTION_ERROR, f"the server is not ready yet: {self.bring_up_error}", 503
            )
        if len(self.episodes) >= self.opts.max_episodes:
            raise EnvError(
                ErrorCode.CAPACITY_REACHED,
                f"Server at capacity: {len(self.episodes)}/{self.opts.max_episodes} episodes active. "
                "Retry when one ends (or serve with a larger --max-episodes).",
                503,
                active_sessions=len(self.episodes),
                max_sessions=self.opts.max_episodes,
            )
