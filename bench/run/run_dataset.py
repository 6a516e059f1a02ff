"""Which dataset a run was made on, read back from its output directory.

`tbx run` records the benchmark root it read (`dataset` in manifest.json,
an absolute path) beside its content hash. Whatever reads a run afterwards
(`tbx judge regrade`, `tbx view`) looks there first, so a run of the demo
pack is regraded against the demo pack, not against the default dataset.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import bench.dataset as datasets  # looked up at call time: tests stand in a loaded benchmark
from bench.dataset import Benchmark

REPO = Path(__file__).resolve().parents[2]
MANIFEST_FILE = "manifest.json"
RESULTS_FILE = "results.jsonl"


class DatasetNotFound(LookupError):
    """No candidate dataset holds the run's tasks (the message says what was tried)."""


def recorded_dataset_paths(manifest: Mapping[str, Any], run_path: Path) -> list[Path]:
    """Where the dataset the manifest names may be: the recorded path itself; a relative
    one (older runs, other producers) relative to the current directory, the run
    directory and this checkout (`--dataset bench/packs/demo`)."""
    d = manifest.get("dataset")
    if not isinstance(d, str) or not d:
        return []
    p = Path(d)
    return [p] if p.is_absolute() else [p, run_path / p, REPO / p]


def read_manifest(run_path: Path) -> dict[str, Any]:
    """The run's manifest.json, or {} when it is missing or unreadable (older or foreign runs)."""
    try:
        data = json.loads((run_path / MANIFEST_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def run_task_ids(run_path: Path) -> list[str]:
    """The task ids of the run's results.jsonl rows, first seen first (none without the file;
    a line that is not a row is skipped: regrade reports unreadable records itself)."""
    try:
        text = (run_path / RESULTS_FILE).read_text()
    except OSError:
        return []
    ids: dict[str, None] = {}
    for line in text.splitlines():
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("task_id"), str):
            ids[row["task_id"]] = None
    return list(ids)


def _missing(bench: Benchmark, task_ids: Iterable[str]) -> list[str]:
    out = []
    for t in task_ids:
        try:
            bench.task(t)
        except KeyError:
            out.append(t)
    return out


def run_benchmark(run_path: Path, task_ids: Sequence[str], fallback: Path | None) -> Benchmark:
    """The benchmark holding every one of `task_ids`: the manifest's dataset, else
    `fallback` (`--dataset`), else (a manifest naming none and no fallback) the default
    root. Raises DatasetNotFound with one line naming each place tried and why it failed."""
    candidates = recorded_dataset_paths(read_manifest(run_path), run_path)
    if fallback is not None:
        candidates.append(fallback)
    if not candidates:
        candidates.append(datasets.default_root())
    tried: list[str] = []
    seen: set[Path] = set()
    for p in candidates:
        key = p.absolute()
        if key in seen:
            continue
        seen.add(key)
        if not p.is_dir():
            tried.append(f"{p} (not a directory)")
            continue
        bench = datasets.load_benchmark(p, strict=False)
        missing = _missing(bench, dict.fromkeys(task_ids))
        if not missing:
            return bench
        tried.append(f"{p} (lacks {len(missing)} of the run's {len(set(task_ids))} tasks, e.g. {missing[0]})")
    raise DatasetNotFound(
        "no dataset holds the run's tasks: tried " + "; ".join(tried) + "; pass --dataset DIR"
    )
