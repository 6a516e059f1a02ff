"""Re-running `tbx view` on the same output (during a run, after a regrade)
re-renders only the tasks whose attempts changed.

A (run, task) group of attempt pages is kept when its key is unchanged: the
key hashes the view's own source, the run's context (label, K, prices, the
dataset), each row of the group and the size and mtime of each attempt
record and trajectory. The group's summaries are kept in
data/attempts-cache.json, so a kept group costs a few stat() calls.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
from pathlib import Path
from typing import Any

from bench.run.results import ResultRow
from bench.view.load import Run, source_paths
from bench.view.summary import Summary

CACHE_FILE = "attempts-cache.json"  # under the site's data/


@functools.cache
def code_version() -> str:
    h = hashlib.sha256()
    for p in sorted(Path(__file__).parent.glob("*.py")):
        h.update(p.read_bytes())
    return h.hexdigest()


def run_context(run: Run, dataset: str) -> str:
    material = {
        "code": code_version(),
        "label": run.label,
        "repeats": run.repeats,
        "prices": {k: v.model_dump() for k, v in run.prices.items()},
        "roles": run.role_models,
        "dataset": dataset,
        "dataset_hash": run.manifest.get("dataset_hash"),
    }
    return json.dumps(material, sort_keys=True, default=str)


def _stat(path: Path | None) -> list[int] | None:
    if path is None:
        return None
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def group_key(run: Run, rows: list[ResultRow], context: str) -> str:
    h = hashlib.sha256(context.encode())
    for row in rows:
        record, traj = source_paths(run, row)
        aid = getattr(row, "attempt_id", None)
        error = run.errors.get(aid) if isinstance(aid, str) else None
        h.update(row.model_dump_json().encode())
        h.update(json.dumps([_stat(record), _stat(traj), error], sort_keys=True, default=str).encode())
    return h.hexdigest()


def load(site: Path) -> dict[str, Any]:
    try:
        data = json.loads((site / "data" / CACHE_FILE).read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def save(site: Path, groups: dict[str, Any]) -> None:
    tmp = site / "data" / f".{CACHE_FILE}.tmp"
    tmp.write_text(json.dumps(groups, separators=(",", ":")))
    tmp.replace(site / "data" / CACHE_FILE)


def entry(key: str, summaries: list[Summary]) -> dict[str, Any]:
    return {"key": key, "summaries": [dataclasses.asdict(s) for s in summaries]}


def kept(site: Path, cached: dict[str, Any] | None, key: str) -> list[Summary] | None:
    """The group's summaries when its key matches and every page is still there."""
    if not cached or cached.get("key") != key:
        return None
    try:
        summaries = [Summary(**s) for s in cached["summaries"]]
    except (TypeError, KeyError):
        return None
    return summaries if all((site / s.href).is_file() for s in summaries) else None
