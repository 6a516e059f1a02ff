"""Paired comparison of runs (`tbx compare`): pure statistics over the tasks
two runs share.

For runs A and B, each task t they share (a valid attempt in both) gives a
per-task value in each run: pass rate c_t/n_t, pass^k = C(c_t, k)/C(n_t, k)
(`bench.report.metrics.pass_hat_k`, k common to the pair) and observed k/k
(1 if c_t = n_t). A delta is the mean over shared tasks of (B_t - A_t), so
it equals the difference of the two runs' metrics on those tasks. Its 95%
interval is a **paired bootstrap over tasks**: tasks are resampled with
replacement (the same draw for both runs, so per-task difficulty cancels),
seeded and deterministic. The p-value is a two-sided **paired sign-flip
permutation test** on the per-task pass-rate differences (scipy), exact when
the tasks with a non-zero difference are few enough to enumerate. Why these
choices: docs/metrics.md ("Comparing runs").

Flipped tasks: reliable (k/k) in one run and not the other; solved at least
once in one and never in the other. The noise floor of a run is the same
statistics between its first and its second half of repeats.

The attempts are counted in one score view (bench.report.views), the
canonical one unless asked otherwise: an unresolved system error is then a
failed attempt, so "valid" below means "counted in that view". Runs made on
datasets of different `dataset_hash` are paired on the task ids they share,
with a warning; so are runs whose rubric questions were asked in different
styles (`rubric_judge`, docs/judge.md); runs sharing no task id are refused.

Nothing here reads files except `load_runs`; everything else takes
tallies (`bench.report.metrics.tally`) and returns pydantic records.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from itertools import combinations
from pathlib import Path
from typing import Any

import numpy as np
from pydantic import BaseModel, Field, computed_field

from bench.report.metrics import TaskTally, metrics_for_run, pass_hat_k, tally
from bench.report.views import CANONICAL, ScoreView, view_label
from bench.run.results import ResultRow, ResultsError, RunDir, load_run
from judge import UNRECORDED_RUBRIC_STYLE, RubricStyle

DEFAULT_SEED = 0
BOOTSTRAP_RESAMPLES = 10_000
PERMUTATION_RESAMPLES = 9_999  # exact below 2**13 sign patterns; Monte Carlo (seeded) above
LEVEL = 0.95
TEST_NAME = "paired sign-flip permutation test on per-task pass rates (two-sided)"
_CHUNK = 1_000  # bootstrap resamples drawn at once (bounds memory at ~tasks × 8 kB)


# -- the statistics ----------------------------------------------------------


def bootstrap_means(diffs: np.ndarray, seed: int, resamples: int = BOOTSTRAP_RESAMPLES) -> np.ndarray:
    """The paired bootstrap distribution of the mean of `diffs` (tasks × metrics,
    or tasks): `resamples` draws of len(diffs) tasks with replacement, one
    row of column means per draw. The same draws serve every column."""
    d = np.asarray(diffs, dtype=float)
    if d.ndim == 1:
        d = d[:, None]
    n = d.shape[0]
    if n == 0:
        raise ValueError("no tasks to resample")
    if resamples < 1:
        raise ValueError("need at least one resample")
    rng = np.random.default_rng(seed)
    out = np.empty((resamples, d.shape[1]))
    for start in range(0, resamples, _CHUNK):
        size = min(_CHUNK, resamples - start)
        idx = rng.integers(0, n, size=(size, n))
        out[start : start + size] = d[idx].mean(axis=1)
    return out


def percentile_interval(samples: np.ndarray, level: float = LEVEL) -> list[tuple[float, float]]:
    """Per column of `samples` (resamples × metrics): the central `level` percentile interval."""
    lo, hi = np.quantile(samples, [(1 - level) / 2, (1 + level) / 2], axis=0)
    return [(float(a), float(b)) for a, b in zip(np.atleast_1d(lo), np.atleast_1d(hi), strict=True)]


def sign_flip_p_value(diffs: Sequence[float], seed: int, resamples: int = PERMUTATION_RESAMPLES) -> float:
    """Two-sided p-value of the paired sign-flip permutation test of mean(diffs) = 0.

    Under the null hypothesis A and B are exchangeable within each task, so
    each task's difference is as likely negated. Tasks with no difference
    cannot change the statistic and are dropped first; with m tasks left the
    null distribution is enumerated exactly when 2**m <= resamples, else
    sampled (seeded). No difference anywhere, or one task's (its two sign
    patterns are equally extreme): 1.0.
    """
    nonzero = np.asarray([d for d in diffs if abs(d) > 1e-12], dtype=float)
    if nonzero.size <= 1:
        return 1.0
    from scipy.stats import permutation_test  # seconds to import: only when there is something to test

    result = permutation_test(
        (nonzero,),
        lambda x, axis: np.mean(x, axis=axis),
        permutation_type="samples",
        vectorized=True,
        n_resamples=resamples,
        alternative="two-sided",
        rng=np.random.default_rng(seed),
    )
    return float(min(1.0, result.pvalue))


# -- records -----------------------------------------------------------------


class PairStats(BaseModel):
    """B - A over `tasks` shared tasks (whole pair, one domain, or two halves of a run)."""

    tasks: int
    k: int  # the k of pass^k: min of both runs' repeats and every shared task's valid attempts
    pass_at_1_a: float
    pass_at_1_b: float
    delta_pass_at_1: float
    delta_pass_at_1_ci: tuple[float, float]
    pass_hat_k_a: float
    pass_hat_k_b: float
    delta_pass_hat_k: float
    delta_pass_hat_k_ci: tuple[float, float]
    observed_k_of_k_a: float  # share of tasks with every valid attempt passed
    observed_k_of_k_b: float
    delta_observed_k_of_k: float
    delta_observed_k_of_k_ci: tuple[float, float]
    p_value: float


class Flips(BaseModel):
    reliable_only_in_a: list[str] = Field(default_factory=list)  # k/k in A, not in B
    reliable_only_in_b: list[str] = Field(default_factory=list)
    solved_only_in_a: list[str] = Field(default_factory=list)  # >= 1 pass in A, none in B
    solved_only_in_b: list[str] = Field(default_factory=list)

    def tasks(self) -> set[str]:
        return {
            *self.reliable_only_in_a,
            *self.reliable_only_in_b,
            *self.solved_only_in_a,
            *self.solved_only_in_b,
        }


class TaskPoint(BaseModel):
    """One shared task: its valid attempts and passes in each run (the scatter's point)."""

    task_id: str
    domain: str
    a_attempts: int
    a_passed: int
    b_attempts: int
    b_passed: int

    @computed_field  # type: ignore[prop-decorator]
    @property
    def a_rate(self) -> float:
        return self.a_passed / self.a_attempts

    @computed_field  # type: ignore[prop-decorator]
    @property
    def b_rate(self) -> float:
        return self.b_passed / self.b_attempts


class NoiseFloor(BaseModel):
    """A run against itself: repeats < `split` (first half) as A, the rest as B."""

    run: str
    split: int | None = None
    stats: PairStats | None = None
    note: str | None = None  # why there is none


class RunInfo(BaseModel):
    label: str
    path: str
    k: int  # repeats per task the run asked for (bench.report.metrics)
    tasks: int  # tasks with an attempt counted in the canonical view
    dataset_hash: str | None = None  # the manifest's; None for a run that recorded none
    rubric_judge: RubricStyle = UNRECORDED_RUBRIC_STYLE  # how its rubric questions were asked
    rubric_judged_attempts: int = 0  # rows showing the rubric judge at work (bench.report.metrics)


class PairComparison(PairStats):
    a: str  # run labels
    b: str
    flips: Flips
    only_in_a: list[str] = Field(default_factory=list)  # a valid attempt in A only: not compared
    only_in_b: list[str] = Field(default_factory=list)
    same_dataset: bool | None = None  # equal dataset_hash; None when a run recorded none
    per_domain: dict[str, PairStats] = Field(default_factory=dict)
    noise_floor: dict[str, NoiseFloor] = Field(default_factory=dict)  # run label -> its floor
    points: list[TaskPoint] = Field(default_factory=list)
    links: dict[str, dict[str, str]] = Field(default_factory=dict)  # task -> {view name: href}


class Comparison(BaseModel):
    view: ScoreView = CANONICAL  # the score view paired (bench.report.views)
    view_label: str = view_label(CANONICAL)
    seed: int
    bootstrap_resamples: int
    permutation_resamples: int
    level: float = LEVEL
    test: str = TEST_NAME
    warnings: list[str] = Field(default_factory=list)  # runs of different datasets or rubric styles
    runs: list[RunInfo]
    noise_floor: dict[str, NoiseFloor]
    pairs: list[PairComparison]


# -- computation -------------------------------------------------------------


def _valid(tallies: Mapping[str, TaskTally]) -> dict[str, TaskTally]:
    return {t: x for t, x in tallies.items() if x.attempts > 0}


def pair_points(a: Mapping[str, TaskTally], b: Mapping[str, TaskTally]) -> list[TaskPoint]:
    """The tasks with a valid attempt in both, in A's order."""
    va, vb = _valid(a), _valid(b)
    return [
        TaskPoint(
            task_id=t,
            domain=x.domain,
            a_attempts=x.attempts,
            a_passed=x.passed,
            b_attempts=vb[t].attempts,
            b_passed=vb[t].passed,
        )
        for t, x in va.items()
        if t in vb
    ]


def pair_stats(
    points: Sequence[TaskPoint],
    k: int,
    *,
    seed: int = DEFAULT_SEED,
    bootstrap_resamples: int = BOOTSTRAP_RESAMPLES,
    permutation_resamples: int = PERMUTATION_RESAMPLES,
) -> PairStats | None:
    """Deltas, paired bootstrap intervals and the p-value over `points`; None without any.

    `k` is lowered to the smallest valid attempt count among the points, so
    pass^k is defined for every task."""
    if not points:
        return None
    k = max(1, min([k, *(p.a_attempts for p in points), *(p.b_attempts for p in points)]))
    a = np.array(
        [
            (p.a_rate, pass_hat_k(p.a_attempts, p.a_passed, k), float(p.a_passed == p.a_attempts))
            for p in points
        ]
    )
    b = np.array(
        [
            (p.b_rate, pass_hat_k(p.b_attempts, p.b_passed, k), float(p.b_passed == p.b_attempts))
            for p in points
        ]
    )
    d = b - a
    ci = percentile_interval(bootstrap_means(d, seed, bootstrap_resamples))
    ma, mb, md = a.mean(axis=0), b.mean(axis=0), d.mean(axis=0)
    return PairStats(
        tasks=len(points),
        k=k,
        pass_at_1_a=float(ma[0]),
        pass_at_1_b=float(mb[0]),
        delta_pass_at_1=float(md[0]),
        delta_pass_at_1_ci=ci[0],
        pass_hat_k_a=float(ma[1]),
        pass_hat_k_b=float(mb[1]),
        delta_pass_hat_k=float(md[1]),
        delta_pass_hat_k_ci=ci[1],
        observed_k_of_k_a=float(ma[2]),
        observed_k_of_k_b=float(mb[2]),
        delta_observed_k_of_k=float(md[2]),
        delta_observed_k_of_k_ci=ci[2],
        p_value=sign_flip_p_value(list(d[:, 0]), seed, permutation_resamples),
    )


def flips(points: Sequence[TaskPoint]) -> Flips:
    out = Flips()
    for p in points:
        ra, rb = p.a_passed == p.a_attempts, p.b_passed == p.b_attempts
        if ra and not rb:
            out.reliable_only_in_a.append(p.task_id)
        if rb and not ra:
            out.reliable_only_in_b.append(p.task_id)
        if p.a_passed and not p.b_passed:
            out.solved_only_in_a.append(p.task_id)
        if p.b_passed and not p.a_passed:
            out.solved_only_in_b.append(p.task_id)
    return out


def noise_floor(
    rows: Sequence[ResultRow], label: str, k: int, view: ScoreView = CANONICAL, **stats_args: Any
) -> NoiseFloor:
    """The run's first half of repeats (repeat < k // 2) against its second half."""
    split = k // 2
    if split < 1:
        return NoiseFloor(run=label, note=f"K={k}: fewer than two repeats to split")
    first = tally([r for r in rows if r.repeat < split], view=view)
    second = tally([r for r in rows if r.repeat >= split], view=view)
    points = pair_points(first, second)
    stats = pair_stats(points, split, **stats_args)
    if stats is None:
        return NoiseFloor(run=label, split=split, note="no task has a valid attempt in both halves")
    return NoiseFloor(run=label, split=split, stats=stats)


def compare_pair(
    a_label: str,
    a_rows: Sequence[ResultRow],
    a_k: int,
    b_label: str,
    b_rows: Sequence[ResultRow],
    b_k: int,
    view: ScoreView = CANONICAL,
    **stats_args: Any,
) -> PairComparison | None:
    """B against A on their shared tasks (attempts counted in `view`); None when they share none."""
    ta, tb = _valid(tally(a_rows, view=view)), _valid(tally(b_rows, view=view))
    points = pair_points(ta, tb)
    overall = pair_stats(points, min(a_k, b_k), **stats_args)
    if overall is None:
        return None
    per_domain: dict[str, PairStats] = {}
    for domain in sorted({p.domain for p in points}):
        s = pair_stats([p for p in points if p.domain == domain], overall.k, **stats_args)
        if s is not None:
            per_domain[domain] = s
    return PairComparison(
        **overall.model_dump(),
        a=a_label,
        b=b_label,
        flips=flips(points),
        only_in_a=sorted(set(ta) - set(tb)),
        only_in_b=sorted(set(tb) - set(ta)),
        per_domain=per_domain,
        points=points,
    )


def compare_runs(
    runs: Sequence[tuple[RunInfo, Sequence[ResultRow]]],
    *,
    seed: int = DEFAULT_SEED,
    bootstrap_resamples: int = BOOTSTRAP_RESAMPLES,
    permutation_resamples: int = PERMUTATION_RESAMPLES,
    view: ScoreView = CANONICAL,
) -> Comparison:
    """Every pair (earlier run as A, later as B) and every run's noise floor, in `view`.
    A pair sharing no task raises ResultsError naming both (and their datasets when
    they differ); a pair of different datasets gets a warning."""
    if len(runs) < 2:
        raise ResultsError("tbx compare needs at least two run directories")
    args: dict[str, Any] = {
        "seed": seed,
        "bootstrap_resamples": bootstrap_resamples,
        "permutation_resamples": permutation_resamples,
    }
    floors = {info.label: noise_floor(rows, info.label, info.k, view, **args) for info, rows in runs}
    pairs: list[PairComparison] = []
    warnings: list[str] = []
    for (ia, ra), (ib, rb) in combinations(runs, 2):
        same = same_dataset(ia, ib)
        if not {r.task_id for r in ra} & {r.task_id for r in rb}:
            raise ResultsError(
                f"{ia.label} ({ia.path}) and {ib.label} ({ib.path}) share no task id"
                + ("" if same is not False else f" (different datasets: {_datasets(ia, ib)})")
                + ": nothing to pair"
            )
        pair = compare_pair(ia.label, ra, ia.k, ib.label, rb, ib.k, view, **args)
        if pair is None:
            raise ResultsError(
                f"{ia.label} ({ia.path}) and {ib.label} ({ib.path}) share no task with an attempt "
                f"counted in the {view} view in both"
            )
        pair.same_dataset = same
        if same is False:
            warnings.append(
                f"{ia.label} and {ib.label} were run on different datasets ({_datasets(ia, ib)}): "
                f"paired on the {pair.tasks} task ids they share, whose contents may differ"
            )
        if (styles := rubric_styles_text(ia, ib)) is not None:
            warnings.append(styles)
        pair.noise_floor = {ia.label: floors[ia.label], ib.label: floors[ib.label]}
        pairs.append(pair)
    return Comparison(
        view=view,
        view_label=view_label(view),
        warnings=warnings,
        seed=seed,
        bootstrap_resamples=bootstrap_resamples,
        permutation_resamples=permutation_resamples,
        runs=[info for info, _ in runs],
        noise_floor=floors,
        pairs=pairs,
    )


def same_dataset(a: RunInfo, b: RunInfo) -> bool | None:
    """Whether the two runs were made on the same dataset (by hash); None when one is unknown."""
    if not a.dataset_hash or not b.dataset_hash:
        return None
    return a.dataset_hash == b.dataset_hash


def rubric_styles_text(a: RunInfo, b: RunInfo) -> str | None:
    """The warning for two runs whose rubric questions were asked in different styles
    (docs/judge.md), when either shows the rubric judge at work; None otherwise."""
    if a.rubric_judge == b.rubric_judge or not (a.rubric_judged_attempts or b.rubric_judged_attempts):
        return None
    return (
        f"{a.label} asked its rubric questions in the {a.rubric_judge} style, {b.label} in the "
        f"{b.rubric_judge} style: their rubric-task verdicts are not comparable (compared anyway; "
        "`tbx judge regrade RUN --rejudge-rubrics --rubric-judge STYLE` asks one run's again in the other's)"
    )


def _datasets(a: RunInfo, b: RunInfo) -> str:
    return f"dataset_hash {(a.dataset_hash or '?')[:12]} vs {(b.dataset_hash or '?')[:12]}"


# -- reading run directories ---------------------------------------------------


def load_runs(dirs: Sequence[str | Path]) -> list[tuple[RunInfo, RunDir]]:
    """Read the run directories (bench.run.results); labels and K as `tbx
    report` makes them (run_name or directory name, duplicates numbered)."""
    from bench.report.build import unique_labels

    loaded = [load_run(d) for d in dirs]
    metrics = [metrics_for_run(r) for r in loaded]
    labels = unique_labels([m.run for m in metrics])
    return [
        (
            RunInfo(
                label=label,
                path=r.path,
                k=m.k,
                tasks=m.tasks,
                dataset_hash=_dataset_hash(r),
                rubric_judge=m.rubric_judge,
                rubric_judged_attempts=m.rubric_judged_attempts,
            ),
            r,
        )
        for r, m, label in zip(loaded, metrics, labels, strict=True)
    ]


def _dataset_hash(run: RunDir) -> str | None:
    value = run.manifest.get("dataset_hash")
    return value if isinstance(value, str) and value else None
