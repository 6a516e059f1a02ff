"""`tbx run`'s coordinator: plan, resume, schedule, grade, write, report progress, stop.

Every (task, repeat) becomes an `AttemptSpec` (bench.run.attempt) executed
against a sandbox provider; the coordinator only handles specs and outcomes.
It holds what must not leave the judging process, the golden end states
(bench.run.golden, replayed once per task and cached) and the rubric judge,
and grades each outcome here (bench.run.grading) before writing its row
(bench.run.output). Re-running with the same --out skips attempts that
already have a row; --retry-errors re-runs only the system-error attempts.

A system error is retried in the run itself, a bounded number of times
(`RunOptions.retries`, bench.run.retries: a try lost before the agent's first
turn is charged to a budget of its own, apart from --max-retries): each failed try is a
line in errors.jsonl marked `retried`, and the (task, repeat) gets exactly one
row in results.jsonl, its final try's, which counts the tries before it.
Where the attempts execute is the executor's business (bench.run.executor).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from bench.dataset import Benchmark, Task
from bench.defaults import DAEMON_WAIT, POLICY_SEARCH, WALL_CLOCK, PolicySearch
from bench.evaluator.functions import FunctionRunner
from bench.llm.config import ModelsConfig
from bench.llm.judge import LazyRubricJudge
from bench.prepare import task_preparation
from bench.rollout.agents import AgentScript
from bench.rollout.trajectory import Trajectory
from bench.run.attempt import AttemptFailure, AttemptOutcome, AttemptSpec, TryPhase, attempt_spec
from bench.run.daemon import DaemonGate, DaemonGone
from bench.run.errors import BundleChanged, OutputUnwritable, RubricsNeedJudge
from bench.run.executor import AttemptExecutor, LocalExecutor
from bench.run.golden import GoldenStore
from bench.run.grading import Graded, grade
from bench.run.output import RunOutput, dataset_hash, set_aside, write_manifest
from bench.run.recording import try_usage, write_graded, write_retried_error, write_system_error
from bench.run.results import RoleUsage, add_usage
from bench.run.retries import RetryPolicy, TriesSpent
from judge import AttemptRecord
from sandbox import DockerProvider, Limits, Preparer, SandboxProvider, Upcoming, new_id

log = logging.getLogger(__name__)


class RunOptions(BaseModel):
    out: Path
    agent: str = "oracle"
    repeat: int = Field(default=20, ge=1)
    concurrency: int = Field(default=2, ge=1)
    wall_clock: float = WALL_CLOCK
    runtime: str | None = None
    retry_errors: bool = False
    golden_cache: Path | None = None
    run_name: str | None = None
    # Judge rubric tasks on state alone (no judge model): the row says so.
    skip_rubrics: bool = False
    # Sandboxes booted ahead per domain (sandbox.pool): the boot leaves the
    # attempt's critical path; each is still used by exactly one attempt.
    warm: int = Field(default=0, ge=0)
    # When the output holds results of another bundle: set them aside and start
    # over (instead of refusing).
    restart_on_change: bool = False
    # What the policy-search tool runs: vector + keyword hybrid, or the keyword fallback.
    policy_search: PolicySearch = POLICY_SEARCH
    # System errors retried within the run (0: none; --retry-errors still works after).
    retries: RetryPolicy = Field(default_factory=RetryPolicy)
    # Seconds the run holds new tries while the container daemon does not answer
    # (bench.run.daemon); past that it stops, resumable.
    daemon_wait: float = Field(default=DAEMON_WAIT, ge=0)
    # Harness interventions on (bench.rollout.harness.parse_harness): manifest and bundle.
    harness: tuple[str, ...] = ()
    # What each role's model server said of itself at start-up (bench.env.endpoint_probe):
    # the manifest's `model_servers`, outside the bundle.
    model_servers: dict[str, Any] = Field(default_factory=dict)
    # The `scripted` agent's calls (--script FILE) and where they were read: manifest and bundle.
    agent_script: AgentScript | None = None
    agent_script_path: Path | None = None


ProgressFn = Callable[[Any, Task, int, str], None]


class Coordinator:
    """One `tbx run`: `await Coordinator(bench, opts, config).run(tasks)` -> counts."""

    def __init__(
        self,
        bench: Benchmark,
        opts: RunOptions,
        config: ModelsConfig | None = None,
        progress: ProgressFn | None = None,
        *,
        provider: SandboxProvider | None = None,
        executor: AttemptExecutor | None = None,
        golden: GoldenStore | None = None,
        notice: Callable[[str], None] | None = None,
    ):
        self.bench = bench
        self.opts = opts
        self.config = config
        self.progress = progress
        self.notice = notice or log.warning
        self.run_id = new_id("run")
        self.output = RunOutput(opts.out)
        self.executor: AttemptExecutor = executor or LocalExecutor(
            provider or DockerProvider(warm=opts.warm), config
        )
        self.golden = golden or GoldenStore(
            bench, opts.golden_cache, runtime=opts.runtime, run_id=self.run_id
        )
        self.judge = LazyRubricJudge(config.judge) if config is not None and config.judge else None
        # Test functions (bench.evaluator): set up by `run` when a task is graded by one.
        self.functions: FunctionRunner | None = None
        self.images: dict[str, str] = {}
        self.bundle_hash: str | None = None
        self.data_hash: str | None = None
        self._counts = {"done": 0, "passed": 0, "failed": 0, "errors": 0, "retried": 0}
        self.total = 0
        self.started = time.monotonic()
        self.phase = "starting"
        self._stopping = False
        self._preparations: dict[str, Preparer] = {}
        self._preparations_lock = threading.Lock()
        # (task id, repeat) -> the messages of its tries that failed and were retried
        self._tries: dict[tuple[str, int], list[str]] = {}
        # (task id, repeat) -> what those tries spent, per role (the row's `retried_usage`)
        self._spent: dict[tuple[str, int], dict[str, RoleUsage]] = {}
        # System errors by cause (bench.run.causes): the attempts' final ones, the retried tries.
        self.error_causes: Counter[str] = Counter()
        self.retried_causes: Counter[str] = Counter()
        # Rubric replies the judge gave that could not be read, in the graded attempts so far.
        self.judge_errors = 0
        # What stopped the run (the output could not be written), raised once the attempts in flight end.
        self._fatal: OutputUnwritable | None = None
        self.gate = DaemonGate(
            self.executor.sandboxes.ping,
            opts.daemon_wait,
            notice=self.notice,
            on_back=self.executor.sandboxes.recovered,
        )

    # ---- what the progress view reads
    @property
    def counts(self) -> dict[str, int]:
        return {**self._counts, "alive": self.executor.sandboxes.alive}

    @property
    def warm_sandboxes(self) -> int:
        return self.executor.sandboxes.warm

    @property
    def nodes(self) -> dict[str, dict[str, int]] | None:
        """Cluster node -> attempts running and done there (None off a cluster)."""
        return getattr(self.executor, "nodes", None)

    def stop(self) -> None:
        """Start no further attempt; those running finish and are written."""
        self._stopping = True
        self.phase = "stopping: finishing the attempts in flight"

    # ---- plan
    def preflight(self, tasks: list[Task]) -> None:
        """Errors that must stop a run before any sandbox starts."""
        if any(t.runs_function for t in tasks):
            self.functions = FunctionRunner(
                self.run_id,
                self.config.judge if self.config is not None else None,
                concurrency=self.opts.concurrency,
            )
            self.functions.image  # noqa: B018 - a missing evaluator image stops the run here
        rubric_tasks = [t.id for t in tasks if t.has_rubrics and not t.runs_function]
        if rubric_tasks and not self.opts.skip_rubrics and (self.config is None or self.config.judge is None):
            raise RubricsNeedJudge(len(rubric_tasks))

    def plan(self, tasks: list[Task]) -> list[tuple[Task, int]]:
        """The (task, repeat) pairs still to run (resume: finished ones are skipped)."""
        skip = self.output.done(self.opts.retry_errors)
        return [(t, r) for t in tasks for r in range(self.opts.repeat) if (t.id, r) not in skip]

    def spec_for(self, task: Task, repeat: int, attempt_id: str) -> AttemptSpec:
        return attempt_spec(
            self.bench,
            task,
            repeat,
            run_id=self.run_id,
            attempt_id=attempt_id,
            agent=self.opts.agent,
            models=self.config,
            images=self.images,
            bundle_hash=self.bundle_hash,
            wall_clock=self.opts.wall_clock,
            limits=Limits(runtime=self.opts.runtime),
            policy_search=self.opts.policy_search,
            harness=self.opts.harness,
            agent_script=self.opts.agent_script,
        )

    def _preparation(self, task: Task) -> Preparer:
        """What the attempts of `task` are prepared with (any repeat: the same rows and
        documents), for the pool to prepare sandboxes ahead; recent ones are kept,
        since the repeats of a task come one after another."""
        with self._preparations_lock:
            cached = self._preparations.get(task.id)
        if cached is None:
            # Equal to what the spec's sandbox_request() builds (one fingerprint), without the spec.
            cached = task_preparation(self.bench, task, policy_search=self.opts.policy_search)
            with self._preparations_lock:
                self._preparations[task.id] = cached
                while len(self._preparations) > 8:
                    self._preparations.pop(next(iter(self._preparations)))
        return cached

    async def _open_output(self) -> None:
        """Lock, repair, and write the manifest (or set a superseded run aside)."""
        self.output.lock()
        for name in self.output.repair():
            self.notice(f"tbx run: {name} ended in a half-written line (a killed run); cut it off")
        self.phase = "sweeping stale containers, resolving images"
        await self.executor.start(self.run_id)
        self.images = dict(self.executor.sandboxes.images)
        if self.functions is not None:  # only then: a plain run's bundle is what it always was
            self.images["evaluator"] = self.functions.image
        digests = await self.executor.sandboxes.image_digests()
        self.data_hash = await asyncio.to_thread(dataset_hash, self.bench.root)

        def manifest() -> dict[str, Any]:
            return write_manifest(
                self.opts.out,
                self.bench,
                agent=self.opts.agent,
                repeats=self.opts.repeat,
                run_name=self.opts.run_name,
                images=self.images,
                digests=digests,
                config=self.config,
                run_id=self.run_id,
                data_hash=self.data_hash,
                policy_search=self.opts.policy_search,
                harness=self.opts.harness,
                model_servers=self.opts.model_servers,
                agent_script=self._script_entry(),
            )

        try:
            written = manifest()
        except BundleChanged as change:
            if not self.opts.restart_on_change:
                raise
            dest = set_aside(self.opts.out, change.previous)
            self.notice(
                f"tbx run: {', '.join(change.changed)} changed since the results in {self.opts.out}; "
                f"they are now in {dest}, starting over"
            )
            self.output.make_dirs()
            written = manifest()
        self.bundle_hash = written["bundle_hash"]

    def _script_entry(self) -> dict[str, Any] | None:
        script = self.opts.agent_script
        if script is None:
            return None
        return script.manifest_entry(self.opts.agent_script_path or Path("<script>"))

    # ---- schedule
    async def run(self, tasks: list[Task]) -> dict[str, int]:
        self.preflight(tasks)
        try:
            await self._open_output()
            return await self._run(tasks)
        finally:
            self.output.unlock()

    async def _run(self, tasks: list[Task]) -> dict[str, int]:
        todo = self.plan(tasks)
        self.total = len(todo)
        budget: dict[str, int] = {}
        for t, _ in todo:
            budget[t.domain] = budget.get(t.domain, 0) + 1
        self.executor.sandboxes.plan(
            budget,
            [
                Upcoming([t.domain], functools.partial(self._preparation, t))
                for t, _ in todo
                if not self.bench.on_checkout_servers(t)  # booted initialised, prepared by none
            ],
        )
        sem = asyncio.Semaphore(self.opts.concurrency)
        await self.executor.open()

        async def one(task: Task, repeat: int) -> None:
            async with sem:
                if self._stopping:
                    return
                try:
                    await self.attempt(task, repeat)
                except OutputUnwritable as exc:
                    # Nothing more can be recorded: stop (not a system error of every attempt left).
                    self._fatal = self._fatal or exc
                    self.stop()
                    self.phase = f"stopping: {exc}"

        try:
            # Golden states first, so a task whose golden replay fails is reported
            # before its attempts start (those attempts then end as system errors).
            unique = {t.id: t for t, _ in todo}
            self.phase = f"golden end states of {len(unique)} tasks (cached after the first run)"
            for task_id, exc in await self.compute_goldens(list(unique.values()), sem):
                self.notice(f"tbx run: golden replay of {task_id} failed: {exc}")
            self.phase = f"attempts, concurrency {self.opts.concurrency}"
            self.started = time.monotonic()
            await asyncio.gather(*(one(t, r) for t, r in todo))
            if self._fatal is not None:
                raise self._fatal
        finally:
            try:
                await self._close_executor()
            finally:
                if self.judge is not None:
                    await self.judge.aclose()
                if self.functions is not None:
                    await self.functions.aclose()
        if self.gate.gone is not None:
            raise self.gate.gone
        return self.counts

    async def _close_executor(self) -> None:
        try:
            await self.executor.close(self.run_id)
            return
        except Exception as exc:
            failure = exc
        # The daemon may go away as the run ends (a restart after the last attempt): wait
        # for it as a try would, then close again. Failing with the daemon answering is
        # this run's own error and stands.
        if self.gate.gone is None and not await self.gate.answers():
            with contextlib.suppress(DaemonGone):
                await self.gate.ready()
        if self.gate.gone is None:
            await self.executor.close(self.run_id)
            return
        # Everything the run created carries its labels and this process's pid: once it
        # has exited they are orphans, which the next start (the resume) sweeps first.
        self.notice(
            f"tbx run: could not remove this run's containers with the daemon away ({failure}); "
            "the next `tbx run` or `tbx gc` removes them"
        )

    async def compute_goldens(self, tasks: list[Task], sem: asyncio.Semaphore) -> list[tuple[str, Exception]]:
        """Each task's golden end state (once per task, in separate sandboxes,
        `sem` bounding how many at once), cached; returns the failures."""
        failures: list[tuple[str, Exception]] = []

        async def one(task: Task) -> None:
            if self.bench.on_checkout_servers(task):
                return  # no golden calls: its servers' effects are what its test functions read
            async with sem:
                try:
                    await self.golden.get(task)
                except Exception as exc:
                    failures.append((task.id, exc))

        await asyncio.gather(*(one(t) for t in tasks))
        return failures

    # ---- one attempt: spec out, outcome back, graded and written here
    async def attempt(self, task: Task, repeat: int) -> None:
        """(task, repeat) until it is graded, or its system errors use up the retries."""
        policy = self.opts.retries
        tries = 0
        spent = TriesSpent()
        while True:
            tries += 1
            try:
                await self.gate.ready()
            except DaemonGone:
                self.stop()  # no row: the resume runs this (task, repeat) again
                return
            failure, outage, spent = await self.try_once(task, repeat, tries, spent)
            if failure is None:
                return
            self._counts["retried"] += 1
            if not outage:  # after an outage the gate has done the waiting
                await asyncio.sleep(policy.wait(spent.total))

    async def try_once(
        self, task: Task, repeat: int, tries: int, spent: TriesSpent | None = None
    ) -> tuple[str | None, bool, TriesSpent]:
        """Try number `tries` (`spent`: the failed tries before it, by budget).
        A system error is written as the row (the last try) or as a retried line in
        errors.jsonl; returns that retried error's message (None: a row was written),
        whether the daemon was away and the failed tries with this one."""
        spent = spent or TriesSpent()
        attempt_id = new_id(f"{task.uid[:24]}-r{repeat}")
        timings: dict[str, float] = {}
        record = AttemptRecord(
            task_id=task.id, attempt_id=attempt_id, run_id=self.run_id, repeat=repeat, domain=task.domain
        )
        record_error = functools.partial(self._system_error, task, record, tries=tries)
        outcome: AttemptOutcome | None = None
        failed: tuple[Trajectory | None, AttemptFailure]
        phase: TryPhase | None = "golden"  # where the try stands: errors.jsonl's `phase` if it fails
        try:
            t = time.monotonic()
            checkout = self.bench.on_checkout_servers(task)
            golden = None if checkout else await self.golden.get(task)
            timings["golden"] = time.monotonic() - t
            phase = "checkout"
            spec = await asyncio.to_thread(self.spec_for, task, repeat, attempt_id)
            outcome = await self.executor.execute(spec)
            timings.update(outcome.timings)
            phase = outcome.phase
            if outcome.system_error is not None:
                raise _TryFailed(outcome.trajectory, outcome.system_error)
            phase = "grading"
            t = time.monotonic()
            graded = await grade(
                self.bench,
                task,
                golden,
                outcome.terminal_state,
                outcome.calls,
                initial=outcome.initial_state,
                final_message=outcome.final_message,
                judge=self.judge,
                skip_rubrics=self.opts.skip_rubrics,
                resource_limit=outcome.resource_limit,  # the agent's own load: a failure, graded here
                functions=self.functions,
                trajectory=outcome.trajectory,
                attempt_id=attempt_id,
                # a checkout's own servers' (golden None: their test function alone grades)
                server_effects=outcome.server_effects,
                init_results=outcome.init_results,
                finish_reason=outcome.finish_reason,
            )
            timings["judge"] = time.monotonic() - t
            self._finish(task, record, outcome, graded, timings)
            return None, False, spent
        except OutputUnwritable:
            raise
        except _TryFailed as exc:
            failed = exc.failed
        except Exception as exc:
            partial = getattr(exc, "trajectory", None)
            traj = outcome.trajectory if outcome is not None else None
            traj = traj or (partial if isinstance(partial, Trajectory) else None)
            failed = (traj, AttemptFailure.of(exc))
        # Was the daemon away? Then the try says nothing about the task (bench.run.daemon).
        outage = not await self.gate.answers()
        spent = spent if outage else spent.plus(phase)
        return record_error(*failed, timings, spent=spent, outage=outage, phase=phase), outage, spent

    # ---- write (bench.run.recording: the env server writes rows the same way)
    def _finish(
        self,
        task: Task,
        record: AttemptRecord,
        outcome: AttemptOutcome,
        graded: Graded,
        timings: dict[str, float],
    ) -> None:
        verdict = graded.verdict
        key = (task.id, record.repeat)
        retried = self._tries.pop(key, [])
        write_graded(
            self.output,
            task,
            record,
            outcome,
            graded,
            timings,
            retried=retried,
            retried_usage=self._spent.pop(key, {}),
            models=self.config,
        )
        self._counts["done"] += 1
        self._counts["passed" if verdict.passed else "failed"] += 1
        self.judge_errors += verdict.judge_errors
        if self.progress:
            self.progress(self, task, record.repeat, verdict.summary())

    def _system_error(
        self,
        task: Task,
        record: AttemptRecord,
        traj: Trajectory | None,
        failure: AttemptFailure,
        timings: dict[str, float],
        *,
        tries: int,
        spent: TriesSpent,
        outage: bool = False,
        phase: TryPhase | None = None,
    ) -> str | None:
        """Write a try's system error; returns its message when it will be retried
        (not once a stop was asked for: a resume or --retry-errors picks it up; never
        when its fault says a new try would only repeat it; `spent`: the failed tries
        with this one, by budget). A try the daemon's outage failed is always retried,
        uncounted: if the daemon stays away, the (task, repeat) gets no row and the
        resume runs it."""
        policy = self.opts.retries
        key = (task.id, record.repeat)
        earlier = self._tries.get(key, [])
        message, trace, fault = str(failure), failure.traceback, failure.fault
        again = outage or (policy.again(spent) and not self._stopping)
        if again and fault.retryable:
            write_retried_error(
                self.output,
                task,
                record,
                traj,
                message,
                trace,
                timings,
                fault=fault,
                tries=tries,
                phase=phase,
            )
            self._tries[key] = [*earlier, message]
            self._spent[key] = add_usage(self._spent.get(key, {}), try_usage(traj))
            self.retried_causes[fault.cause] += 1
            if self.progress:
                self.progress(self, task, record.repeat, f"system error, retrying: {message[:200]}")
            return message
        self._tries.pop(key, None)
        write_system_error(
            self.output,
            task,
            record,
            traj,
            message,
            trace,
            timings,
            fault=fault,
            retried=earlier,
            retried_usage=self._spent.pop(key, {}),
            phase=phase,
        )
        self._counts["done"] += 1
        self._counts["errors"] += 1
        self.error_causes[fault.cause] += 1
        if fault.cause == "model endpoint incompatible" and self.error_causes[fault.cause] == 1:
            # said at once and whole: every attempt may meet it (docs/reliability.md)
            self.notice(f"tbx run: the model endpoint refuses what tbx sends, not retried: {message}")
        if self.progress:
            self.progress(self, task, record.repeat, f"system error: {message[:200]}")
        return None


class _TryFailed(Exception):
    """An outcome's system error, carried to the one place a failed try is written."""

    def __init__(self, traj: Trajectory | None, failure: AttemptFailure):
        super().__init__(str(failure))
        self.failed = (traj, failure)
