"""Writing the site: `build_site(dirs, out)` writes

    OUT/index.html                 the tasks page (rows from data/tasks.js)
    OUT/data/tasks.js              every task row, one mark strip per run
    OUT/tasks/<task>.html          one page per task
    OUT/attempts/r<run>/<id>.html  one page per attempt
    OUT/assets/view.css, tasks.js

One pass over each run's rows, one task at a time (a task's repeats are
loaded together so each attempt page can link its siblings), keeping only a
small summary per attempt in memory: the cost is linear in the attempts and
the browser only ever loads the tasks page and the pages it opens.
"""

from __future__ import annotations

import itertools
import os
import shutil
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.view import assets, cache, pages
from bench.view.diff import group
from bench.view.load import Attempt, Run, load_attempt, load_dataset, open_runs, task_of
from bench.view.summary import Summary, summarize, task_rows
from servers.engine.schema import TableSpec

SITE_MARKER = ".tbx-view"  # a directory holding it was written by tbx view (safe to replace)


@dataclass
class SiteResult:
    out: Path
    runs: int = 0
    tasks: int = 0
    attempts: int = 0
    rendered: int = 0  # attempt pages written (the others were unchanged)
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0


class SiteError(ValueError):
    """The output directory cannot take the site."""


def _write(path: Path, text: str) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)


def prepare(out: Path) -> None:
    """Create the site directory, refusing to overwrite one tbx view did not write."""
    if out.exists():
        if not out.is_dir():
            raise SiteError(f"{out} exists and is not a directory")
        if any(out.iterdir()) and not (out / SITE_MARKER).exists():
            raise SiteError(f"{out} is not empty and was not written by tbx view; choose another --out")
        # attempts/ stays: unchanged attempt pages are kept (bench.view.cache)
        for sub in ("tasks", "assets"):
            shutil.rmtree(out / sub, ignore_errors=True)
    for sub in ("tasks", "attempts", "data", "assets"):
        (out / sub).mkdir(parents=True, exist_ok=True)
    (out / SITE_MARKER).write_text("written by tbx view\n")


def _remove_stale(out: Path, hrefs: set[str]) -> None:
    """Attempt pages of rows that are gone (a run set aside, fewer runs given)."""
    for page in (out / "attempts").glob("*/*.html"):
        if page.relative_to(out).as_posix() not in hrefs:
            page.unlink()


def _specs(domain: str, cache: dict[str, list[TableSpec]]) -> list[TableSpec]:
    if domain not in cache:
        try:
            from servers.registry import load_domain

            cache[domain] = list(load_domain(domain).tables)
        except (KeyError, ImportError):
            cache[domain] = []
    return cache[domain]


def _task_text(bench: Any, task_id: str) -> tuple[Any, list[tuple[str, dict[str, Any]]], list[str]]:
    from bench.run.grading import task_rubrics

    task = task_of(bench, task_id)
    if task is None:
        return None, [], []
    try:
        return task, bench.golden_calls(task), task_rubrics(bench, task)
    except (KeyError, ValueError):  # a task whose scenario is missing still gets its texts
        return task, [], []


def _attempt_pages(
    out: Path,
    run: Run,
    attempts: list[Attempt],
    bench: Any,
    specs: dict[str, list[TableSpec]],
    texts: dict[str, Any],
) -> list[Summary]:
    summaries = [summarize(a) for a in attempts]
    strip: list[Summary | None] = [None] * max((s.repeat + 1 for s in summaries), default=0)
    for s in summaries:
        strip[s.repeat] = s
    for a, s in zip(attempts, summaries, strict=True):
        verdict = a.record.verdict if a.record is not None else None
        tables = []
        if verdict is not None and verdict.differences:
            needs_rows = any(d.field for d in verdict.differences)
            terminal = a.terminal_state() if needs_rows else None
            tables = group(verdict.differences, terminal, _specs(a.row.domain, specs))
        if a.row.task_id not in texts:
            texts[a.row.task_id] = _task_text(bench, a.row.task_id)
        task, _, rubrics = texts[a.row.task_id]
        _write(out / s.href, pages.attempt_page(a, s, strip, tables, task, rubrics))
    return summaries


def build_site(
    dirs: Sequence[Path],
    out: Path,
    *,
    dataset: Path | None = None,
    report_href: str | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SiteResult:
    started = time.monotonic()
    runs = open_runs(list(dirs))
    prepare(out)
    bench, dataset_note = load_dataset(runs, dataset)
    result = SiteResult(out=out, runs=len(runs))
    if dataset_note:
        result.notes.append(dataset_note)
    _write(out / "assets" / "view.css", assets.CSS)
    _write(out / "assets" / "tasks.js", assets.TASKS_JS)
    total = sum(len(r.rows) for r in runs)
    specs: dict[str, list[TableSpec]] = {}
    texts: dict[str, Any] = {}
    summaries: list[Summary] = []
    previous = cache.load(out)
    groups: dict[str, Any] = {}
    dataset_id = str(bench.root if bench is not None else dataset_note)
    for run in runs:
        (out / "attempts" / f"r{run.index}").mkdir(parents=True, exist_ok=True)
        context = cache.run_context(run, dataset_id)
        for task_id, group_iter in itertools.groupby(run.rows, key=lambda r: r.task_id):
            group_rows = list(group_iter)
            name = f"r{run.index}/{task_id}"
            key = cache.group_key(run, group_rows, context)
            done = cache.kept(out, previous.get(name), key)
            if done is None:
                done = _attempt_pages(
                    out, run, [load_attempt(run, r) for r in group_rows], bench, specs, texts
                )
                result.rendered += len(done)
            groups[name] = cache.entry(key, done)
            summaries += done
            if progress is not None:
                progress(len(summaries), total)
    cache.save(out, groups)
    _remove_stale(out, {s.href for s in summaries})
    rows = task_rows(summaries, [r.repeats for r in runs])
    for t in rows:
        if t.task_id not in texts:
            texts[t.task_id] = _task_text(bench, t.task_id)
        task, calls, rubrics = texts[t.task_id]
        _write(out / t.href, pages.task_page(t, runs, task, calls, rubrics, dataset_note))
    _write(out / "data" / "tasks.js", pages.tasks_data(rows, runs))
    _write(out / "index.html", pages.tasks_page(runs, result.notes, report_href))
    result.tasks = len(rows)
    result.attempts = len(summaries)
    result.seconds = time.monotonic() - started
    return result
