"""Any recorded attempt's state, live again (`tbx up --from RUN_DIR ATTEMPT [--step N]`).

An attempt's record holds what it started from and every call that reached the tool
proxy, in order (`AttemptRecord.prefix`: calls replayed before the agent had the
episode; `trajectory`: the agent's own). The servers are deterministic (fixed clock, id
rules), so a sandbox prepared as the attempt's was, with the first N of those calls
replayed through the proxy, stands in the state the attempt had after N calls:

  plan_revival(run dir, attempt name, step)   the record, the sandbox request (the
      task's seed + data_patch + sources, as `tbx run` built it: bench.prepare; a Session
      API session of an edited task: the preparation its recorder wrote beside its
      states, SEED_SUFFIX), the tool policy, the calls, the recorded states
  revived(plan, provider, proxy)              open_sandbox (the one sandbox path), the
      initial state checked against the recorded one (a difference: the data changed
      since the run, InitialStateChanged), registered under the task's tool policy, the
      calls replayed through the proxy's MCP endpoint (a refused call is refused again),
      and after a full replay the canonical hash checked against the recorded terminal
      state (`Revived.check`; a difference names the first differing table and row)

It never reads a golden state: only the run directory's own files and the dataset's
task (what the attempt itself was prepared with). The canonical states are not used to
seed: they drop unstable fields and reorder rows, so they are checked, never loaded.
"""

from __future__ import annotations

import asyncio
import gzip
import json
import re
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError

from bench.dataset import Benchmark, DatasetError, load_benchmark
from bench.defaults import POLICY_SEARCH, PolicySearch
from bench.prepare import TaskPreparation, sandbox_request
from bench.replay.mcp_calls import replay_calls
from bench.run.attempt import task_tool_policy
from bench.run.errors import RunError
from bench.run.results import ResultRow, ResultsError, RunDir, load_run
from bench.run.run_dataset import recorded_dataset_paths
from judge import (
    State,
    ToolCallView,
    atomic_write,
    dump_dsn,
    initial_state_of,
    read_attempt,
    state_hash,
    terminal_state_of,
)
from sandbox import (
    Limits,
    ProxyServer,
    Registration,
    SandboxLease,
    SandboxProvider,
    SandboxRequest,
    ToolPolicy,
    open_sandbox,
    register_request,
)
from servers.engine.seeding import DataPatchError, initial_rows
from servers.registry import load_domain

# states/<attempt_id>.seed.json.gz: a Session API session's preparation (SessionSeed),
# written by its recorder for a session that plays no benchmark task (`session:<id>`).
SEED_SUFFIX = ".seed.json.gz"
_REPEAT = re.compile(r"^(?P<task>.+)#(?P<repeat>\d+)$")


class ReviveError(RunError):
    """`tbx up --from` cannot bring the attempt back; the message says why (one line)."""


class RunNotReadable(ReviveError):
    """The run directory is missing or not a run directory."""


class AttemptNotFound(ReviveError):
    """No attempt of the run has that name."""


class AttemptAmbiguous(ReviveError):
    """The name fits more than one attempt of the run."""


class StepOutOfRange(ReviveError):
    """--step is below 0 or past the attempt's recorded calls."""


class NothingToRevive(ReviveError):
    """The attempt left no record or no initial state (a system error before its sandbox was ready)."""


class DatasetMissing(ReviveError):
    """The run's task (its seed and data_patch) cannot be read from any dataset tried."""


class InitialStateChanged(ReviveError):
    """The sandbox prepared now does not start where the attempt started: the data changed since the run."""


class SessionSeed(BaseModel):
    """What a Session API session's sandbox was prepared with when it played no benchmark
    task: the entry's rows (seed + data_patch) and sources, and its tool allow-list.
    Nothing golden (no golden calls, no rubrics)."""

    server: str
    domain: str
    rows: dict[str, list[dict[str, Any]]]
    sources: list[dict[str, Any]] = Field(default_factory=list)
    available_tools: list[str] = Field(default_factory=list)


def write_session_seed(path: Path, seed: SessionSeed) -> None:
    atomic_write(path, gzip.compress(seed.model_dump_json().encode(), mtime=0))


def read_session_seed(path: Path) -> SessionSeed:
    return SessionSeed.model_validate_json(gzip.decompress(path.read_bytes()))


# ---- naming an attempt -----------------------------------------------------------------


def _task_matches(task_id: str, name: str) -> bool:
    # the full id, or its part after "file.py:" (the uid `tbx up TASK` takes too)
    return task_id == name or task_id.split(":", 1)[-1] == name


def find_attempt(run: RunDir, name: str) -> ResultRow:
    """The row of the attempt `name` names: its attempt id (as `tbx view` shows it), or
    TASK#REPEAT, or TASK alone when the run holds one attempt of it (TASK: the full task
    id or the part after `file.py:`)."""
    by_id = [r for r in run.rows if _attempt_id(r) == name]
    if by_id:
        return by_id[0]
    m = _REPEAT.match(name)
    task, repeat = (m["task"], int(m["repeat"])) if m else (name, None)
    rows = [r for r in run.rows if _task_matches(r.task_id, task)]
    if repeat is not None:
        rows = [r for r in rows if r.repeat == repeat]
    if not rows:
        hint = ", ".join(sorted({f"{r.task_id}#{r.repeat}" for r in run.rows})[:3])
        raise AttemptNotFound(
            f"tbx up: no attempt {name!r} in {run.path} (name one by its attempt id as tbx view shows "
            f"it, or as TASK#REPEAT, e.g. {hint or 'none: the run has no attempts'})"
        )
    tasks = sorted({r.task_id for r in rows})
    if len(tasks) > 1:
        raise AttemptAmbiguous(
            f"tbx up: {name!r} fits {len(tasks)} tasks of {run.path} ({', '.join(tasks[:3])}); give the full task id"
        )
    if len(rows) > 1:
        repeats = ", ".join(f"{tasks[0]}#{r.repeat}" for r in sorted(rows, key=lambda r: r.repeat))
        raise AttemptAmbiguous(
            f"tbx up: {name!r} has {len(rows)} attempts in {run.path}; name one: {repeats}"
        )
    return rows[0]


def _attempt_id(row: ResultRow) -> str | None:
    aid = getattr(row, "attempt_id", None)
    return aid if isinstance(aid, str) and aid else None


# ---- the plan --------------------------------------------------------------------------


@dataclass
class RevivalPlan:
    """Everything `revived` needs, read from the run directory (and the dataset's task)."""

    run_dir: Path
    attempt_id: str
    task_id: str
    repeat: int
    domain: str
    request: SandboxRequest
    policy: ToolPolicy
    calls: list[ToolCallView]  # the record's prefix, then its trajectory
    prefix: int  # how many of `calls` were the prefix
    step: int  # how many of `calls` to replay
    initial_state: State
    terminal_state: State | None  # None: the attempt's limit took the database down

    @property
    def full(self) -> bool:
        return self.step == len(self.calls)


def plan_revival(
    run_dir: Path,
    name: str,
    step: int | None = None,
    *,
    dataset: Path | None = None,
    typesense: bool = True,
    limits: Limits | None = None,
) -> RevivalPlan:
    """Read attempt `name` of `run_dir`: its record, recorded states and calls, and the
    sandbox request its attempt was prepared with. `step`: replay the first `step` calls
    (None: all). Raises a ReviveError saying what is missing."""
    try:
        run = load_run(run_dir)
    except ResultsError as exc:
        raise RunNotReadable(f"tbx up: {exc}") from None
    row = find_attempt(run, name)
    aid = _attempt_id(row)
    extra = row.model_extra or {}
    ref = extra.get("attempt_file") or (f"attempts/{aid}.json" if aid else None)
    record_path = (
        None if not isinstance(ref, str) else (Path(ref) if Path(ref).is_absolute() else run_dir / ref)
    )
    if record_path is None or not record_path.is_file():
        raise NothingToRevive(
            f"tbx up: {row.task_id}#{row.repeat} of {run_dir} has no attempt record"
            + (f" ({record_path})" if record_path is not None else "")
        )
    try:
        record = read_attempt(record_path)
    except (OSError, ValidationError, ValueError) as exc:
        raise NothingToRevive(
            f"tbx up: {record_path}: unreadable attempt record: {_first_line(exc)}"
        ) from None
    base = record_path.parent
    try:
        initial = initial_state_of(record, base)
        terminal = terminal_state_of(record, base)
    except (OSError, ValueError) as exc:
        raise NothingToRevive(
            f"tbx up: a recorded state of {record.attempt_id} is unreadable: {_first_line(exc)}"
        ) from None
    if initial is None:
        what = (
            f"a system error ({_first_line(row.error or record.system_error or '')})"
            if row.system_error
            else "no recorded state"
        )
        raise NothingToRevive(
            f"tbx up: attempt {record.attempt_id} ended in {what} before its initial state was recorded: nothing to bring back"
        )
    calls = [*record.prefix, *record.trajectory]
    n = len(calls) if step is None else step
    if not 0 <= n <= len(calls):
        raise StepOutOfRange(
            f"tbx up: --step {step} is out of range: attempt {record.attempt_id} recorded {len(calls)} calls (0..{len(calls)})"
        )
    recorded = run.manifest.get("policy_search")  # what the run's search tool ran (its replies)
    search: PolicySearch = (
        "keyword" if recorded == "keyword" else "hybrid" if recorded == "hybrid" else POLICY_SEARCH
    )
    limits = limits or Limits()
    seed_path = run_dir / "states" / f"{record.attempt_id}{SEED_SUFFIX}"
    if seed_path.is_file():
        request, policy, domain = _session_request(
            seed_path, typesense=typesense, limits=limits, policy_search=search
        )
    else:
        bench = _benchmark(run_dir, run.manifest, record.task_id, dataset)
        task = bench.task(record.task_id)
        request, policy, domain = (
            sandbox_request(bench, task, typesense=typesense, limits=limits, policy_search=search),
            task_tool_policy(bench, task),
            task.domain,
        )
    return RevivalPlan(
        run_dir=run_dir,
        attempt_id=record.attempt_id,
        task_id=record.task_id,
        repeat=record.repeat,
        domain=domain,
        request=request,
        policy=policy,
        calls=calls,
        prefix=len(record.prefix),
        step=n,
        initial_state=initial,
        terminal_state=terminal,
    )


def _first_line(value: object) -> str:
    text = str(value)
    return text.splitlines()[0] if text else value.__class__.__name__


def _session_request(
    path: Path, *, typesense: bool, limits: Limits, policy_search: PolicySearch
) -> tuple[SandboxRequest, ToolPolicy, str]:
    """A Session API session's request, from the preparation its recorder wrote (SessionSeed)."""
    try:
        seed = read_session_seed(path)
        rows = initial_rows(load_domain(seed.domain).tables, seed.rows, None)  # typed again (JSON dates)
    except (OSError, ValueError, DataPatchError) as exc:
        raise NothingToRevive(f"tbx up: {path}: unreadable session preparation: {_first_line(exc)}") from None
    prep = TaskPreparation(
        rows={seed.domain: rows},
        sources=seed.sources if typesense else [],
        policy_search=policy_search,
    )
    request = SandboxRequest(domains=[seed.domain], prepare=prep, typesense=typesense, limits=limits)
    return request, ToolPolicy(allowed_tools=seed.available_tools), seed.domain


def _benchmark(run_dir: Path, manifest: dict[str, Any], task_id: str, dataset: Path | None) -> Benchmark:
    """The dataset holding the attempt's task: --dataset, else the manifest's."""
    candidates = [dataset] if dataset is not None else recorded_dataset_paths(manifest, run_dir)
    if not candidates:
        raise DatasetMissing(f"tbx up: {run_dir}/manifest.json names no dataset; pass --dataset DIR")
    tried = []
    for p in candidates:
        if not p.is_dir():
            tried.append(f"{p} (not a directory)")
            continue
        try:
            bench = load_benchmark(p, strict=False)
        except DatasetError as exc:
            tried.append(f"{p} ({_first_line(exc)})")
            continue
        try:
            bench.task(task_id)
        except KeyError:
            tried.append(f"{p} (has no task {task_id})")
            continue
        return bench
    raise DatasetMissing(f"tbx up: no dataset holds {task_id}: tried {'; '.join(tried)}; pass --dataset DIR")


# ---- the first difference --------------------------------------------------------------


class FirstDifference(BaseModel):
    """The first row (tables by name, rows in canonical order) where two canonical states differ."""

    table: str
    key: str | None = None  # the row's id, or "#<position>" in an id-less table
    recorded: dict[str, Any] | None = None  # None: the row is not in the recorded state
    replayed: dict[str, Any] | None = None  # None: the row is not in the replayed state
    fields: list[str] = Field(default_factory=list)  # the fields whose values differ

    def describe(self) -> str:
        where = f"table {self.table}" + (f" row {self.key}" if self.key is not None else "")
        if self.recorded is None and self.replayed is None:
            return f"{where}: the table is in one state only"
        if self.recorded is None:
            return f"{where}: only in the replayed state"
        if self.replayed is None:
            return f"{where}: only in the recorded state"
        shown = ", ".join(
            f"{f}: recorded {_short(self.recorded.get(f))}, replayed {_short(self.replayed.get(f))}"
            for f in self.fields[:3]
        )
        return f"{where}: {shown}" + (f" (+{len(self.fields) - 3} fields)" if len(self.fields) > 3 else "")


def _short(value: Any, limit: int = 60) -> str:
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _row_key(row: dict[str, Any]) -> str | None:
    return str(row["id"]) if "id" in row else None


def first_difference(recorded: State, replayed: State) -> FirstDifference | None:
    """Where two canonical states first differ (None: equal), table by table in name order;
    rows matched by id (in id order), rows of id-less tables by position."""
    for table in sorted(set(recorded) | set(replayed)):
        if table not in recorded or table not in replayed:
            return FirstDifference(table=table)
        a, b = recorded[table], replayed[table]
        if a == b:
            continue
        if all(_row_key(r) is not None for r in [*a, *b]):
            ra = {_row_key(r): r for r in a}
            rb = {_row_key(r): r for r in b}
            for key in sorted(set(ra) | set(rb), key=str):
                x, y = ra.get(key), rb.get(key)
                if x != y:
                    return _difference(table, key, x, y)
        for i in range(max(len(a), len(b))):
            x = a[i] if i < len(a) else None
            y = b[i] if i < len(b) else None
            if x != y:
                return _difference(table, f"#{i}", x, y)
    return None


def _difference(
    table: str, key: str | None, x: dict[str, Any] | None, y: dict[str, Any] | None
) -> FirstDifference:
    fields = [] if x is None or y is None else sorted(f for f in set(x) | set(y) if x.get(f) != y.get(f))
    return FirstDifference(table=table, key=key, recorded=x, replayed=y, fields=fields)


# ---- the revival -----------------------------------------------------------------------


class ReplayedCall(BaseModel):
    """One recorded call replayed through the proxy."""

    index: int  # 1-based position in the record's prefix + trajectory (`--step index` stops after it)
    tool: str
    prefix: bool  # a call of the record's prefix (before the agent had the episode)
    ok: bool  # neither the MCP error flag nor the servers' in-band error object
    recorded_ok: bool
    same_reply: bool  # the reply text equals the recorded one
    latency_ms: float


class StateCheck(BaseModel):
    """A replayed state against the recorded one."""

    matched: bool
    recorded_hash: str
    replayed_hash: str
    first_difference: FirstDifference | None = None


@dataclass
class Revived:
    """A live sandbox in the attempt's state after `plan.step` calls, registered with the proxy."""

    plan: RevivalPlan
    lease: SandboxLease
    registration: Registration
    initial: StateCheck
    replayed: list[ReplayedCall] = field(default_factory=list)
    check: StateCheck | None = None  # after a full replay: against the recorded terminal state
    timings: dict[str, float] = field(default_factory=dict)


def replayed_calls(calls: Sequence[ToolCallView], records: Sequence[Any], prefix: int) -> list[ReplayedCall]:
    out = []
    for i, (want, got) in enumerate(zip(calls, records, strict=True)):
        out.append(
            ReplayedCall(
                index=i + 1,
                tool=want.tool,
                prefix=i < prefix,
                ok=not (got.is_error or ToolCallView.envelope(got.result)),
                recorded_ok=not want.failed,
                same_reply=got.result == want.result,
                latency_ms=round(got.latency_ms, 2),
            )
        )
    return out


def state_check(recorded: State, replayed: State) -> StateCheck:
    a, b = state_hash(recorded), state_hash(replayed)
    return StateCheck(
        matched=a == b,
        recorded_hash=a,
        replayed_hash=b,
        first_difference=None if a == b else first_difference(recorded, replayed),
    )


async def _dump(lease: SandboxLease, domain: str) -> State:
    return await asyncio.to_thread(dump_dsn, lease.admin_dsn(domain), domain)


@asynccontextmanager
async def revived(plan: RevivalPlan, provider: SandboxProvider, proxy: ProxyServer) -> AsyncIterator[Revived]:
    """The attempt's sandbox, live and registered, its first `plan.step` calls replayed
    through `proxy`; released (and unregistered) on exit. Raises InitialStateChanged when
    the sandbox does not start where the attempt did (nothing is replayed then)."""
    timings: dict[str, float] = {}
    t0 = time.monotonic()
    async with open_sandbox(
        provider, plan.request, label=f"tbx up --from {plan.attempt_id}", timings=timings
    ) as lease:
        prepared = None
        if plan.request.prepare is not None:
            prepared = await lease.prepared_states(plan.request.prepare.fingerprint())
        initial = (
            prepared[plan.domain]
            if prepared is not None and plan.domain in prepared
            else await _dump(lease, plan.domain)
        )
        timings["initial_check"] = time.monotonic() - t0 - timings.get("sandbox_start", 0.0)
        check = state_check(plan.initial_state, initial)
        if not check.matched:
            diff = check.first_difference
            raise InitialStateChanged(
                f"tbx up: the sandbox prepared now does not start where attempt {plan.attempt_id} started "
                f"(the data changed since the run?): {diff.describe() if diff else 'the hashes differ'}"
            )
        reg = await proxy.aregister(register_request(lease, plan.request.attempt_id, plan.policy))
        out = Revived(plan=plan, lease=lease, registration=reg, initial=check, timings=timings)
        wanted = plan.calls[: plan.step]
        t = time.monotonic()
        if wanted:
            records = await replay_calls(reg.url, [(c.tool, dict(c.arguments)) for c in wanted], reg.headers)
            out.replayed = replayed_calls(wanted, records, plan.prefix)
        timings["replay"] = time.monotonic() - t
        if plan.full and plan.terminal_state is not None:
            t = time.monotonic()
            out.check = state_check(plan.terminal_state, await _dump(lease, plan.domain))
            timings["terminal_check"] = time.monotonic() - t
        timings["ready"] = time.monotonic() - t0  # from the checkout's start to a usable sandbox
        try:
            yield out
        finally:
            await proxy.aunregister(reg.token)
