"""Reading what `tbx view` shows: run directories and the dataset's task texts.

Every fact comes from a run's output directory (results.jsonl rows, the
AttemptRecord under attempts/ with its verdict, the trajectory, the states,
errors.jsonl and manifest.json), written by `tbx run`, rewritten by
`tbx judge regrade`, or by any other producer of the same format. Nothing
here runs an attempt or touches a sandbox: the view is built afterwards, on
the host. A missing or unreadable optional file (an attempt record, a
trajectory, a state) becomes a note on the page, never a crash; only a
missing or malformed results.jsonl stops the view (`ResultsError`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from bench.dataset import Benchmark, Task, load_benchmark
from bench.llm.config import Price
from bench.report.metrics import (
    manifest_harness,
    manifest_prices,
    manifest_repeats,
    manifest_role_models,
    rubric_judge_shown,
)
from bench.rollout.trajectory import Trajectory
from bench.run.results import ResultRow, load_run
from bench.run.run_dataset import recorded_dataset_paths
from judge import AttemptRecord, State, terminal_state_of


@dataclass
class Run:
    """One run directory, its rows in (task, repeat) order and its errors by attempt id."""

    index: int
    label: str
    path: Path
    manifest: dict[str, Any]
    rows: list[ResultRow]
    errors: dict[str, dict[str, Any]]
    prices: dict[str, Price] = field(default_factory=dict)
    role_models: dict[str, str] = field(default_factory=dict)

    @property
    def agent(self) -> str | None:
        agent = self.manifest.get("agent")
        return agent if isinstance(agent, str) else None

    @property
    def harness(self) -> list[str]:
        return manifest_harness(self.manifest)

    @property
    def rubric_judge(self) -> str | None:
        return rubric_judge_shown(self.manifest, self.rows)

    @property
    def repeats(self) -> int:
        declared = manifest_repeats(self.manifest)
        seen = max((r.repeat + 1 for r in self.rows), default=0)
        return max(declared or 0, seen)


@dataclass
class Attempt:
    """One attempt with everything recorded about it; `notes` say what could not be read."""

    run: Run
    row: ResultRow
    record: AttemptRecord | None = None
    trajectory: Trajectory | None = None
    error: dict[str, Any] | None = None
    notes: list[str] = field(default_factory=list)

    @property
    def attempt_id(self) -> str:
        return str(getattr(self.row, "attempt_id", None) or f"{slug(self.row.task_id)}-r{self.row.repeat}")

    def terminal_state(self) -> State | None:
        """The attempt's terminal state (read on demand: only pages with field differences need it)."""
        if self.record is None:
            return None
        try:
            return terminal_state_of(self.record, self.record_dir)
        except (OSError, ValueError) as exc:
            self.notes.append(f"terminal state unreadable: {exc}")
            return None

    @property
    def record_dir(self) -> Path:
        return self.run.path / "attempts"


_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def slug(text: str) -> str:
    """A file-name-safe form of an id (task ids hold ':' and '/')."""
    return _UNSAFE.sub("_", text).strip("._") or "_"


def open_runs(dirs: list[Path]) -> list[Run]:
    """Read each run directory (results.jsonl required); labels are made unique."""
    runs: list[Run] = []
    seen: dict[str, int] = {}
    for i, d in enumerate(dirs):
        rd = load_run(d)
        name = rd.manifest.get("run_name")
        label = name if isinstance(name, str) and name else (Path(d).resolve().name or str(d))
        seen[label] = seen.get(label, 0) + 1
        if seen[label] > 1:
            label = f"{label} #{seen[label]}"
        errors = {str(e["attempt_id"]): e for e in rd.errors if e.get("attempt_id")}
        rows = sorted(rd.rows, key=lambda r: (r.task_id, r.repeat))
        runs.append(
            Run(
                index=i,
                label=label,
                path=Path(d),
                manifest=rd.manifest,
                rows=rows,
                errors=errors,
                prices=manifest_prices(rd.manifest),
                role_models=manifest_role_models(rd.manifest),
            )
        )
    return runs


def _resolve(run: Run, ref: Any, default: str | None) -> Path | None:
    rel = ref if isinstance(ref, str) and ref else default
    if rel is None:
        return None
    p = Path(rel)
    return p if p.is_absolute() else run.path / p


def source_paths(run: Run, row: ResultRow) -> tuple[Path | None, Path | None]:
    """Where a row's attempt record and trajectory are (they may not exist)."""
    attempt_id = getattr(row, "attempt_id", None)
    aid = attempt_id if isinstance(attempt_id, str) else None
    extra = row.model_extra or {}
    error = run.errors.get(aid) if aid is not None else None
    record_path = _resolve(run, extra.get("attempt_file"), f"attempts/{aid}.json" if aid else None)
    traj_ref = extra.get("trajectory") or (error or {}).get("trajectory")
    traj_path = _resolve(run, traj_ref, f"trajectories/{aid}.json" if aid else None)
    return record_path, traj_path


def load_attempt(run: Run, row: ResultRow) -> Attempt:
    """The attempt record and trajectory of one row, where they exist."""
    out = Attempt(run=run, row=row)
    attempt_id = getattr(row, "attempt_id", None)
    if isinstance(attempt_id, str):
        out.error = run.errors.get(attempt_id)
    record_path, traj_path = source_paths(run, row)
    if record_path is None:
        out.notes.append("the results row names no attempt record (no attempt_id or attempt_file)")
    else:
        try:
            out.record = AttemptRecord.model_validate_json(record_path.read_bytes())
        except FileNotFoundError:
            shown = record_path.relative_to(run.path) if record_path.is_relative_to(run.path) else record_path
            out.notes.append(f"no attempt record at {shown}")
        except (OSError, ValidationError, ValueError) as exc:
            out.notes.append(f"attempt record {record_path.name} unreadable: {_first_line(exc)}")
    if traj_path is not None and traj_path.is_file():
        try:
            out.trajectory = Trajectory.model_validate_json(traj_path.read_bytes())
        except (OSError, ValidationError, ValueError) as exc:
            out.notes.append(f"trajectory {traj_path.name} unreadable: {_first_line(exc)}")
    return out


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else exc.__class__.__name__


def load_dataset(runs: list[Run], override: Path | None) -> tuple[Benchmark | None, str | None]:
    """The benchmark the runs were made on (for task texts and golden calls):
    `--dataset`, else the manifest's path. Returns (benchmark, problem)."""
    candidates: list[Path] = []
    if override is not None:
        candidates.append(override)
    else:
        for run in runs:
            candidates += recorded_dataset_paths(run.manifest, run.path)
    tried: list[str] = []
    for p in candidates:
        if not p.is_dir():
            tried.append(str(p))
            continue
        try:
            return load_benchmark(p, strict=False), None
        except Exception as exc:  # a broken dataset costs the task texts, never the view
            return None, f"dataset {p} could not be read: {_first_line(exc)}"
    if override is not None:
        return None, f"dataset {override} is not a directory"
    if tried:
        return None, f"dataset not found (looked in {', '.join(tried)}); pass --dataset"
    return None, "no dataset recorded in manifest.json; pass --dataset for task texts"


def task_of(bench: Benchmark | None, task_id: str) -> Task | None:
    if bench is None:
        return None
    try:
        return bench.task(task_id)
    except KeyError:
        return None
