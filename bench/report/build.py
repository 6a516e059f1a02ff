"""`tbx report DIR [DIR...]`'s data: every run's metrics (`bench.report.metrics`)
plus the Pareto frontier of cost per success against pass@1, and the JSON of it.
The outputs are rendered from it by `bench.report.markdown` (report.md) and
`bench.report.html` (report.html), written by `bench.report.write`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from bench.llm.config import Price
from bench.report.metrics import RunMetrics, mark_pareto, metrics_for_run
from bench.report.views import CANONICAL
from bench.run.results import ResultsError, load_run


class Report(BaseModel):
    runs: list[RunMetrics]
    pareto_frontier: list[str] = Field(default_factory=list)  # run labels, cheapest first


def build_report(
    dirs: Sequence[str | Path],
    *,
    prices: Mapping[str, Price] | None = None,
    k: int | None = None,
    cost_roles: Sequence[str] = ("agent",),
) -> Report:
    """Read every run directory and compute its metrics; labels are made unique."""
    if not dirs:
        raise ResultsError("no run directory given")
    runs = [metrics_for_run(load_run(d), k=k, prices=prices, cost_roles=cost_roles) for d in dirs]
    for m, label in zip(runs, unique_labels([m.run for m in runs]), strict=True):
        m.run = label
    front = mark_pareto(runs)
    return Report(runs=runs, pareto_frontier=front)


def unique_labels(labels: Sequence[str]) -> list[str]:
    """Run labels made unique: the second and later of a name get ` #2`, ` #3`."""
    seen: dict[str, int] = {}
    out = []
    for label in labels:
        n = seen[label] = seen.get(label, 0) + 1
        out.append(label if n == 1 else f"{label} #{n}")
    return out


def report_json(report: Report) -> dict[str, Any]:
    """One run: that run's metrics object (its `view` says which; `diagnostic` the other).
    Several: {"view": ..., "runs": [...], "pareto_frontier": [...]} (the frontier of the canonical view)."""
    runs = [r.model_dump(mode="json") for r in report.runs]
    if len(runs) == 1:
        return runs[0]
    return {"view": str(CANONICAL), "runs": runs, "pareto_frontier": report.pareto_frontier}
