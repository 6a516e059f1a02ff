"""`tbx run`: every (task, repeat) is an attempt in its own fresh sandbox.

One attempt: golden end state (replayed once per task in a separate sandbox,
cached) -> sandbox for the attempt -> canonical initial state -> session proxy
registration -> agent conversation -> terminal state -> teardown -> rubric
judge (if any) -> verdict -> one row in results.jsonl.

Output directory:
  results.jsonl   one row per attempt (bench.run.results.ResultRow)
  errors.jsonl    system errors (container, endpoint or judge failures), kept out of the score
  attempts/       one AttemptRecord per attempt (what `tbx judge regrade` reads)
  states/         canonical initial and terminal states (gzip)
  trajectories/   the agent's conversation and tool calls
  manifest.json   tbx version and commit, dataset hash, image digests, config, bundle hash

Re-running with the same --out skips attempts that already have a row;
--retry-errors re-runs only the system-error attempts.
"""

from __future__ import annotations

import asyncio
import contextlib
import gzip
import hashlib
import json
import os
import subprocess
import sys
import time
import traceback
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, SecretStr

from bench.cli.proxy import task_tool_policy
from bench.dataset import Benchmark, Task
from bench.llm.config import ModelsConfig
from bench.replay.sandboxed import dump_state
from bench.rollout.agent_loop import AgentClients, run_attempt_agent
from bench.rollout.trajectory import Trajectory
from bench.run.golden import GoldenStore
from bench.run.regrade import task_rubrics
from bench.run.request import sandbox_request
from bench.run.results import ResultRow, RoleUsage
from judge.canonical import State, canonical_bytes
from judge.records import AttemptRecord, GoldenState, RubricAnswer, ToolCallView, Verdict, write_attempt
from judge.rubric import JudgeModelConfig, RubricJudge
from judge.verdict import decide
from sandbox.labels import new_id
from sandbox.pool import SandboxPool
from sandbox.proxy import ProxyCall, ProxyServer
from sandbox.sandbox import AsyncSandbox, SandboxRequest, resolve_images
from sandbox.services import Limits
from sandbox.sweeper import sweep
from servers.registry import load_domain

STALE_AFTER = 6 * 3600.0
MEMORY_PER_ATTEMPT_GIB = 1.5  # postgres + typesense + server limits, with headroom


class RunOptions(BaseModel):
    out: Path
    agent: str = "oracle"
    repeat: int = Field(default=20, ge=1)
    concurrency: int = Field(default=2, ge=1)
    wall_clock: float = 900.0
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


def default_concurrency(model_agent: bool = False) -> int:
    """Attempts at once. Built-in agents keep the CPU busy (sandbox boots dominate,
    ~3.5 CPU-s per attempt): one per core. A model agent mostly waits on its
    endpoint, so memory is the bound: each attempt and each warm sandbox holds
    three containers (MEMORY_PER_ATTEMPT_GIB), half of it kept for the warm pool,
    capped at 8 so a small machine's boots do not fall behind."""
    cores = os.cpu_count() or 2
    try:
        mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        mem_gib = 8.0
    by_memory = int(mem_gib // MEMORY_PER_ATTEMPT_GIB)
    if model_agent:
        return max(1, min(8, by_memory // 2))
    return max(1, min(cores, by_memory // 2))


def check_memory(concurrency: int, warm: int = 0) -> None:
    try:
        mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    except (ValueError, OSError):
        return
    need = (concurrency + warm) * MEMORY_PER_ATTEMPT_GIB
    if need > mem_gib:
        raise SystemExit(
            f"tbx run: concurrency {concurrency} with {warm} warm sandboxes needs ~{need:.0f} GiB, "
            f"this machine has {mem_gib:.0f} GiB; lower --concurrency or --warm"
        )


# ---- output files -----------------------------------------------------------


class RunOutput:
    """Append-only result files; every line is flushed as soon as it is known,
    so a killed run leaves a consistent, resumable directory."""

    def __init__(self, out: Path):
        self.out = out
        self.make_dirs()
        self.results = out / "results.jsonl"
        self.errors = out / "errors.jsonl"
        self._lock: Any = None

    def make_dirs(self) -> None:
        for sub in ("attempts", "states", "trajectories"):
            (self.out / sub).mkdir(parents=True, exist_ok=True)

    def lock(self) -> None:
        """One writer per output directory: a second `tbx run` on it stops at once
        (the lock goes with the process, so a killed run leaves none behind)."""
        import fcntl

        fh = (self.out / ".lock").open("a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip() or "another process"
            fh.close()
            raise SystemExit(
                f"tbx run: {self.out} is being written by {holder}; wait for it or use another --out"
            ) from None
        fh.seek(0)
        fh.truncate()
        fh.write(f"tbx run pid {os.getpid()}\n")
        fh.flush()
        self._lock = fh

    def repair(self) -> list[str]:
        """Cut a last line that a kill left half-written (it would otherwise fuse with
        the next row). The cut text is kept beside the file; its attempt runs again."""
        repaired = []
        for path in (self.results, self.errors):
            if not path.exists():
                continue
            data = path.read_bytes()
            if not data or data.endswith(b"\n"):
                continue
            keep = data.rfind(b"\n") + 1
            with (path.parent / (path.name + ".partial")).open("ab") as fh:
                fh.write(data[keep:] + b"\n")
            with path.open("r+b") as fh:
                fh.truncate(keep)
            repaired.append(path.name)
        return repaired

    def done(self, retry_errors: bool) -> set[tuple[str, int]]:
        """(task, repeat) pairs that need no new attempt."""
        finished: dict[tuple[str, int], bool] = {}
        if self.results.exists():
            for line in self.results.read_text().splitlines():
                if not line.strip():
                    continue
                try:
                    row = json.loads(line)
                except ValueError:
                    continue  # a line cut short by a kill; its attempt runs again
                finished[(row["task_id"], int(row["repeat"]))] = bool(row.get("system_error"))
        return {k for k, err in finished.items() if not (retry_errors and err)}

    def append(self, path: Path, payload: str) -> None:
        with path.open("a") as fh:
            fh.write(payload.rstrip("\n") + "\n")
            fh.flush()
            os.fsync(fh.fileno())

    def write_state(self, name: str, state: State) -> str:
        rel = f"states/{name}.json.gz"
        tmp = self.out / (rel + ".tmp")
        tmp.write_bytes(gzip.compress(canonical_bytes(state), mtime=0))
        tmp.replace(self.out / rel)
        return "../" + rel  # relative to attempts/


def _git_commit() -> str | None:
    try:
        root = Path(__file__).resolve().parents[2]
        out = subprocess.run(
            ["git", "-C", str(root), "rev-parse", "HEAD"], capture_output=True, text=True, timeout=5
        )
        return out.stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        return None


def dataset_hash(bench: Benchmark) -> str:
    """Content hash of every file the benchmark was read from."""
    h = hashlib.sha256()
    root = Path(bench.root)
    for sub in ("dataset", "releases", "servers"):
        for p in sorted((root / sub).rglob("*")):
            if p.is_file():
                h.update(str(p.relative_to(root)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def write_manifest(
    out: Path,
    bench: Benchmark,
    opts: RunOptions,
    images: dict[str, str],
    config: ModelsConfig | None,
    run_id: str | None = None,
) -> dict[str, Any]:
    from importlib.metadata import PackageNotFoundError, version

    from sandbox.docker_client import docker_client

    try:
        tbx_version = version("tbx")
    except PackageNotFoundError:
        tbx_version = "dev"
    digests = {name: docker_client().images.get(tag).id for name, tag in images.items()}
    manifest: dict[str, Any] = {
        "tbx_version": tbx_version,
        "git_commit": _git_commit(),
        "dataset": str(bench.root),
        "dataset_hash": dataset_hash(bench),
        "images": images,
        "image_digests": digests,
        "agent": opts.agent,
        "repeats": opts.repeat,
        "run_name": opts.run_name or f"{opts.agent}",
        "run_id": run_id,
        "config": config.public_dict() if config is not None else None,
        "started_at": datetime.now(UTC).isoformat(),
    }
    bundle = {k: manifest[k] for k in BUNDLE_KEYS}
    manifest["bundle_hash"] = hashlib.sha256(json.dumps(bundle, sort_keys=True).encode()).hexdigest()
    merge_previous_manifest(out, manifest)
    tmp = out / "manifest.json.tmp"
    tmp.write_text(json.dumps(manifest, indent=2) + "\n")
    tmp.replace(out / "manifest.json")
    return manifest


BUNDLE_KEYS = ("git_commit", "dataset_hash", "image_digests", "agent", "config")


class BundleChanged(SystemExit):
    """The output directory holds attempts of another bundle: resuming would mix
    two builds (or datasets, agents, configs) in one score."""

    def __init__(self, out: Path, changed: list[str], previous: dict[str, Any]):
        self.out, self.changed, self.previous = out, changed, previous
        super().__init__(
            f"tbx run: {out} holds results of a different bundle ({', '.join(changed)} changed); "
            "use a new --out, pass --restart-on-change to set the old results aside, or delete the directory"
        )


def set_aside(out: Path, previous: dict[str, Any]) -> Path:
    """Move a superseded run's files under OUT/superseded/<run id>/ (nothing is deleted)."""
    name = str(previous.get("run_id") or previous.get("started_at") or "previous").replace(":", "-")
    dest = out / "superseded" / name
    n = 1
    while dest.exists():
        n += 1
        dest = out / "superseded" / f"{name}-{n}"
    dest.mkdir(parents=True)
    for item in (
        "results.jsonl",
        "errors.jsonl",
        "results.jsonl.partial",
        "errors.jsonl.partial",
        "manifest.json",
        "attempts",
        "states",
        "trajectories",
    ):
        if (out / item).exists():
            (out / item).rename(dest / item)
    return dest


def merge_previous_manifest(out: Path, manifest: dict[str, Any]) -> None:
    """Resuming: keep the first start time and the earlier run ids; refuse to mix
    attempts of a different bundle (code, dataset, images, agent, config) into one score."""
    previous = _previous_manifest(out)
    if previous is None:
        return
    changed = [k for k in BUNDLE_KEYS if previous.get(k) != manifest.get(k)]
    results = out / "results.jsonl"
    if changed and results.exists() and results.stat().st_size:
        raise BundleChanged(out, changed, previous)
    manifest["started_at"] = previous.get("started_at", manifest.get("started_at"))
    manifest["resumed_at"] = datetime.now(UTC).isoformat()
    earlier = list(previous.get("previous_run_ids") or [])
    if previous.get("run_id"):
        earlier.append(previous["run_id"])
    manifest["previous_run_ids"] = earlier


def _previous_manifest(out: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((out / "manifest.json").read_text())
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


# ---- one attempt ------------------------------------------------------------


def _views(calls: list[ProxyCall]) -> list[ToolCallView]:
    return [ToolCallView.from_reply(c.tool, c.arguments, c.result, c.is_error, c.latency_ms) for c in calls]


def _usage(traj: Trajectory, config: ModelsConfig | None) -> dict[str, RoleUsage]:
    out: dict[str, RoleUsage] = {}
    for role, u in traj.usage.items():
        data = u.model_dump() if hasattr(u, "model_dump") else dict(u)
        data["cost_usd"] = traj.cost_usd.get(role)
        out[role] = RoleUsage.model_validate(data)
    return out


class Runner:
    def __init__(
        self,
        bench: Benchmark,
        opts: RunOptions,
        config: ModelsConfig | None = None,
        progress: Any = None,
    ):
        self.bench = bench
        self.opts = opts
        self.config = config
        self.progress = progress
        self.run_id = new_id("run")
        self.output = RunOutput(opts.out)
        self.images: dict[str, str] = {}
        self.golden = GoldenStore(bench, opts.golden_cache, runtime=opts.runtime, run_id=self.run_id)
        self.rubric_judge: RubricJudge | None = None
        self.counts = {"done": 0, "passed": 0, "failed": 0, "errors": 0, "alive": 0}
        self.pools: dict[str, SandboxPool] = {}
        self.pool_budget: dict[str, int] = {}
        self.total = 0
        self.started = time.monotonic()
        self.phase = "starting"

    async def attempt(
        self, task: Task, repeat: int, proxy: ProxyServer, clients: AgentClients | None
    ) -> None:
        attempt_id = new_id(f"{task.uid[:24]}-r{repeat}")
        timings: dict[str, float] = {}
        traj: Trajectory | None = None
        record = AttemptRecord(
            task_id=task.id, attempt_id=attempt_id, run_id=self.run_id, repeat=repeat, domain=task.domain
        )
        try:
            t = time.monotonic()
            golden = await self.golden.get(task)
            timings["golden"] = time.monotonic() - t
            request = await asyncio.to_thread(
                sandbox_request,
                self.bench,
                task,
                run_id=self.run_id,
                attempt_id=attempt_id,
                images=self.images,
                limits=Limits(runtime=self.opts.runtime),
            )
            t = time.monotonic()
            self.counts["alive"] += 1
            try:
                async with await self._sandbox(task, request) as sb:
                    timings["sandbox_start"] = time.monotonic() - t
                    t = time.monotonic()
                    initial = await asyncio.to_thread(dump_state, sb.handle, task.domain)
                    timings["initial_dump"] = time.monotonic() - t
                    policy = task_tool_policy(self.bench, task)
                    reg = await proxy.aregister(
                        attempt_id,
                        sb.handle.servers,
                        policy.allowed_tools or None,
                        policy.overrides,
                        arg_overrides=policy.arg_overrides,
                    )
                    t = time.monotonic()
                    try:
                        traj = await run_attempt_agent(
                            self.opts.agent,
                            task,
                            self.bench,
                            reg.url,
                            reg.headers,
                            self.config,
                            seed=repeat,
                            wall_clock=self.opts.wall_clock,
                            clients=clients,
                        )
                    finally:
                        calls = await proxy.aunregister(reg.token)
                    timings["agent"] = time.monotonic() - t
                    t = time.monotonic()
                    terminal = await asyncio.to_thread(dump_state, sb.handle, task.domain)
                    timings["final_dump"] = time.monotonic() - t
                    t = time.monotonic()
            finally:
                self.counts["alive"] -= 1
            timings["teardown"] = time.monotonic() - t
            t = time.monotonic()
            verdict, answers, rubrics_skipped = await self.grade(
                task, golden, initial, terminal, calls, traj.final_message
            )
            timings["judge"] = time.monotonic() - t
            record.initial_state_path = self.output.write_state(f"{attempt_id}.initial", initial)
            record.terminal_state_path = self.output.write_state(f"{attempt_id}.terminal", terminal)
            record.trajectory = _views(calls)
            record.final_message = traj.final_message
            record.rubric_answers = answers
            record.verdict = verdict
            self._finish(task, repeat, record, traj, verdict, timings, rubrics_skipped)
        except Exception as exc:
            self._system_error(task, repeat, record, traj, exc, timings)

    async def grade(
        self,
        task: Task,
        golden: GoldenState,
        initial: State,
        terminal: State,
        calls: list[ProxyCall],
        final_message: str,
    ) -> tuple[Verdict, list[RubricAnswer] | None, bool]:
        """(verdict, rubric answers, rubrics skipped) of one attempt's end state
        (also used by the OpenEnv server, `bench.env.episode`)."""
        rubrics = task_rubrics(self.bench, task)
        rubrics_skipped = bool(rubrics) and self.opts.skip_rubrics
        if rubrics_skipped:
            rubrics = []
        answers: list[RubricAnswer] | None = None
        if rubrics:
            answers = await self._judge_rubrics(rubrics, final_message)
        verdict = decide(
            task.id,
            load_domain(task.domain).tables,
            golden,
            terminal,
            _views(calls),
            initial=initial,
            rubrics=rubrics,
            rubric_answers=answers,
        )
        return verdict, answers, rubrics_skipped

    @property
    def warm_sandboxes(self) -> int:
        return sum(p.spare for p in self.pools.values())

    async def _sandbox(self, task: Task, request: SandboxRequest) -> AsyncSandbox:
        """A cold sandbox, or a warm one from the task's domain pool (seeded here)."""
        if not self.opts.warm:
            return AsyncSandbox(request)
        pool = self.pools.get(task.domain)
        if pool is None:
            pool = SandboxPool(
                request.domains,
                size=self.opts.warm,
                typesense=request.typesense,
                limits=request.limits,
                run_id=self.run_id,
                images=self.images,
                budget=self.pool_budget.get(task.domain),
                fail_fast=False,
            )
            self.pools[task.domain] = pool
            await pool.__aenter__()
        return await pool.acquire(seed=request.seed, policy_sources=request.policy_sources)

    async def _judge_rubrics(self, rubrics: list[str], final_message: str) -> list[RubricAnswer]:
        if self.rubric_judge is None:
            if self.config is None or self.config.judge is None:
                raise RuntimeError(
                    "task has rubrics but the config names no judge model (--config with a judge role)"
                )
            role = self.config.judge
            self.rubric_judge = RubricJudge(
                JudgeModelConfig(
                    model=role.model,
                    base_url=role.base_url,
                    api_key=SecretStr(role.resolved_api_key()),
                    timeout=role.timeout,
                    temperature=role.temperature or 0.0,
                )
            )
        return await self.rubric_judge.judge(rubrics, final_message)

    def _write_trajectory(self, attempt_id: str, traj: Trajectory | None) -> str | None:
        if traj is None:
            return None
        rel = f"trajectories/{attempt_id}.json"
        (self.opts.out / rel).write_text(traj.model_dump_json())
        return rel

    def _finish(
        self,
        task: Task,
        repeat: int,
        record: AttemptRecord,
        traj: Trajectory,
        verdict: Verdict,
        timings: dict[str, float],
        rubrics_skipped: bool = False,
    ) -> None:
        rel = self._write_trajectory(record.attempt_id, traj)
        write_attempt(self.opts.out / "attempts" / f"{record.attempt_id}.json", record)
        row = ResultRow.model_validate(
            {
                "task_id": task.id,
                "repeat": repeat,
                "domain": task.domain,
                "passed": verdict.passed,
                "system_error": False,
                "signature": verdict.signature,
                "finish_reason": traj.finish_reason,
                "usage": _usage(traj, self.config),
                "timings": {k: round(v, 4) for k, v in timings.items()},
                "attempt_id": record.attempt_id,
                "attempt_file": f"attempts/{record.attempt_id}.json",
                "trajectory": rel,
                "strict_match": verdict.strict,
                "differences": len(verdict.differences),
                "rubrics_skipped": rubrics_skipped,
            }
        )
        self.output.append(self.output.results, row.to_json_line())
        self.counts["done"] += 1
        self.counts["passed" if verdict.passed else "failed"] += 1
        if self.progress:
            self.progress(self, task, repeat, verdict.summary())

    def _system_error(
        self,
        task: Task,
        repeat: int,
        record: AttemptRecord,
        traj: Trajectory | None,
        exc: BaseException,
        timings: dict[str, float],
    ) -> None:
        partial = getattr(exc, "trajectory", None)
        traj = traj or (partial if isinstance(partial, Trajectory) else None)
        rel = self._write_trajectory(record.attempt_id, traj)
        message = f"{exc.__class__.__name__}: {exc}"
        record.system_error = message
        with contextlib.suppress(OSError):
            write_attempt(self.opts.out / "attempts" / f"{record.attempt_id}.json", record)
        error = {
            "task_id": task.id,
            "repeat": repeat,
            "attempt_id": record.attempt_id,
            "error": message,
            "traceback": "".join(traceback.format_exception(exc))[-4000:],
            "trajectory": rel,
            "at": datetime.now(UTC).isoformat(),
        }
        self.output.append(self.output.errors, json.dumps(error))
        row = ResultRow.model_validate(
            {
                "task_id": task.id,
                "repeat": repeat,
                "domain": task.domain,
                "passed": False,
                "system_error": True,
                "error": message,
                "finish_reason": traj.finish_reason if traj else None,
                "timings": {k: round(v, 4) for k, v in timings.items()},
                "attempt_id": record.attempt_id,
            }
        )
        self.output.append(self.output.results, row.to_json_line())
        self.counts["done"] += 1
        self.counts["errors"] += 1
        if self.progress:
            self.progress(self, task, repeat, f"system error: {message[:200]}")

    async def compute_goldens(self, tasks: list[Task], sem: asyncio.Semaphore) -> list[tuple[str, Exception]]:
        """Each task's golden end state (once per task, in separate sandboxes,
        `sem` bounding how many at once), cached; returns the failures."""
        failures: list[tuple[str, Exception]] = []

        async def one(task: Task) -> None:
            async with sem:
                try:
                    await self.golden.get(task)
                except Exception as exc:
                    failures.append((task.id, exc))

        await asyncio.gather(*(one(t) for t in tasks))
        return failures

    def preflight(self, tasks: list[Task]) -> None:
        """Errors that must stop a run before any sandbox starts."""
        rubric_tasks = [t.id for t in tasks if t.has_rubrics]
        if rubric_tasks and not self.opts.skip_rubrics and (self.config is None or self.config.judge is None):
            raise SystemExit(
                f"tbx run: {len(rubric_tasks)} selected task(s) have yes/no rubrics but no judge model is "
                "configured: pass --config with a `judge` role, or --skip-rubrics to judge them on state alone"
            )

    async def run(self, tasks: list[Task]) -> dict[str, int]:
        self.preflight(tasks)
        self.output.lock()
        for name in self.output.repair():
            print(f"tbx run: {name} ended in a half-written line (a killed run); cut it off", file=sys.stderr)
        self.phase = "sweeping stale containers, resolving images"
        # Orphans included: containers of a killed run (on this output or not) go now.
        await asyncio.to_thread(sweep, None, STALE_AFTER, True)
        self.images = await asyncio.to_thread(resolve_images, True)
        try:
            write_manifest(self.opts.out, self.bench, self.opts, self.images, self.config, self.run_id)
        except BundleChanged as change:
            if not self.opts.restart_on_change:
                raise
            dest = set_aside(self.opts.out, change.previous)
            print(
                f"tbx run: {', '.join(change.changed)} changed since the results in {self.opts.out}; "
                f"they are now in {dest}, starting over",
                file=sys.stderr,
            )
            self.output.make_dirs()
            write_manifest(self.opts.out, self.bench, self.opts, self.images, self.config, self.run_id)
        skip = self.output.done(self.opts.retry_errors)
        todo = [(t, r) for t in tasks for r in range(self.opts.repeat) if (t.id, r) not in skip]
        self.total = len(todo)
        self.pool_budget = {}
        for t, _ in todo:
            self.pool_budget[t.domain] = self.pool_budget.get(t.domain, 0) + 1
        sem = asyncio.Semaphore(self.opts.concurrency)
        clients = None
        if self.config is not None and self.config.agent is not None:
            clients = AgentClients.from_config(self.config, user=self.config.user is not None)
        proxy = ProxyServer().start()

        async def one(task: Task, repeat: int) -> None:
            async with sem:
                await self.attempt(task, repeat, proxy, clients)

        try:
            # Golden states first, so a task whose golden replay fails is reported
            # before its attempts start (those attempts then end as system errors).
            unique = {t.id: t for t, _ in todo}
            self.phase = f"golden end states of {len(unique)} tasks (cached after the first run)"
            for task_id, exc in await self.compute_goldens(list(unique.values()), sem):
                print(f"tbx run: golden replay of {task_id} failed: {exc}", file=sys.stderr)
            self.phase = f"attempts, concurrency {self.opts.concurrency}"
            self.started = time.monotonic()
            await asyncio.gather(*(one(t, r) for t, r in todo))
        finally:
            for pool in self.pools.values():
                await pool.close()
            proxy.close()
            if clients is not None:
                await clients.aclose()
            if self.rubric_judge is not None:
                await self.rubric_judge.aclose()
            await asyncio.to_thread(sweep, self.run_id)
        return dict(self.counts)
