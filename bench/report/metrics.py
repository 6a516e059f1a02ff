"""Run metrics: pass@1 with a 95% Wilson interval over tasks, pass@k, pass^k,
observed k/k, retention, failure signatures, system errors, cost per success
and cost per reliable task, per run and per domain; the Pareto frontier of
cost per success against pass@1 across runs.

Definitions (docs/metrics.md has them with examples):

* Two views (bench.report.views). Canonical: every row is an attempt, and a
  system error still there after the retries is a failed one. Diagnostic
  (errors excluded): a task's attempts are its rows without `system_error`;
  system errors never enter a denominator, and a task with no other row is
  left out and listed. Both count the system errors beside the figures.
* n_t attempts (of the view), c_t passes. pass@1 = mean over tasks of c_t / n_t.
  pass@k = mean of 1 - C(n_t - c_t, k) / C(n_t, k); pass^k = mean of
  C(c_t, k) / C(n_t, k); both for k in {1, 5, 10, 20} up to the smallest
  n_t, plus k = retention_k.
* K: the run's repeats (`repeats` / `k` in the manifest, else the most rows
  any task has). Tasks with fewer than K valid attempts are flagged.
  retention_k = min(K, smallest n_t); retention = pass^retention_k / pass@1.
* observed k/k: tasks whose every attempt passed (count, share of tasks).
* cost per successful attempt = sum_t mean cost_t / (tasks × pass@1);
  cost per reliable task = cost of all attempts / tasks passing k/k.
  None when the denominator is 0 or some attempt's cost is unknown.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from bench.llm.config import Price
from bench.report.provenance import DataProvenance, recorded_provenance
from bench.report.views import CANONICAL, DIAGNOSTIC, ScoreView
from bench.run.causes import count_causes
from bench.run.results import ResultRow, RunDir
from judge import UNRECORDED_RUBRIC_STYLE, RubricStyle, recorded_rubric_style

K_VALUES: tuple[int, ...] = (1, 5, 10, 20)
Z95 = 1.959963984540054  # two-sided 95% normal quantile
UNLABELLED = "unlabelled"  # a failed attempt without a signature
UNKNOWN_DOMAIN = "unknown"


# -- estimators --------------------------------------------------------------


def _check(n: int, c: int, k: int) -> None:
    if n < 1 or k < 1:
        raise ValueError(f"need n >= 1 and k >= 1 (n={n}, k={k})")
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n (n={n}, c={c})")
    if k > n:
        raise ValueError(f"k={k} exceeds the {n} attempts")


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of P(at least one of k attempts passes) from n attempts
    with c passes: 1 - C(n-c, k) / C(n, k) (1.0 when k > n - c)."""
    _check(n, c, k)
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_hat_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of P(all of k attempts pass): C(c, k) / C(n, k) (0.0 when c < k)."""
    _check(n, c, k)
    return math.comb(c, k) / math.comb(n, k)


def wilson_interval(p: float, n: int, z: float = Z95) -> tuple[float, float]:
    """Wilson score interval for a proportion `p` observed over `n` units."""
    if n <= 0:
        raise ValueError("need n >= 1")
    if not 0.0 <= p <= 1.0:
        raise ValueError(f"p={p} is not a proportion")
    z2 = z * z
    denom = 1.0 + z2 / n
    center = (p + z2 / (2 * n)) / denom
    half = z * math.sqrt(p * (1 - p) / n + z2 / (4 * n * n)) / denom
    return max(0.0, center - half), min(1.0, center + half)


# -- records -----------------------------------------------------------------


class TaskTally(BaseModel):
    """One task's attempts in a run, in one view (bench.report.views)."""

    task_id: str
    domain: str
    attempts: int = 0  # attempts the view counts (n_t): system errors too in the canonical view
    passed: int = 0  # c_t
    system_errors: int = 0  # rows with system_error, counted in `attempts` or not by the view
    costs: list[float | None] = Field(default_factory=list)  # per counted attempt


class Share(BaseModel):
    count: int
    share: float | None  # count / tasks (None without tasks)


class CostMetrics(BaseModel):
    """USD. `roles` are the roles whose spend counts (the agent under test by
    default); `by_role` is every role's total over all rows, system errors included."""

    roles: list[str]
    priced: bool  # every counted attempt has a known cost
    unpriced_attempts: int = 0
    total_usd: float | None = None  # all counted attempts
    mean_per_attempt_usd: float | None = None  # mean over tasks of the task's mean
    per_success_usd: float | None = None
    per_reliable_task_usd: float | None = None
    # What was actually spent: every role's total over all rows (system errors included)
    # and all their tries (the retried ones too); `spent_usd` the cost roles' share of it.
    by_role: dict[str, float | None] = Field(default_factory=dict)
    spent_usd: float | None = None


TOKEN_FIELDS = ("input_tokens", "cached_tokens", "output_tokens")


class RoleSpend(BaseModel):
    """One role's tokens over all rows and tries of a run, and their cost (None: unpriced)."""

    input_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    calls: int = 0  # model requests, where the usage counted them
    usd: float | None = 0.0


class GroupMetrics(BaseModel):
    """Metrics over a set of tasks (a whole run or one domain) in one view."""

    view: ScoreView = CANONICAL  # what system errors count as (bench.report.views)
    tasks: int  # tasks with at least one counted attempt
    attempts: int  # counted attempts (canonical: every row; diagnostic: valid attempts)
    passed_attempts: int
    system_errors: int  # rows with system_error: failed attempts (canonical) or outside (diagnostic)
    excluded_tasks: list[str] = Field(default_factory=list)  # no counted attempt
    k: int  # repeats per task the run asked for
    min_attempts: int  # smallest attempt count over tasks
    max_attempts: int
    short_tasks: list[str] = Field(default_factory=list)  # fewer than k attempts
    pass_at_1: float | None
    pass_at_1_ci: tuple[float, float] | None  # 95% Wilson over tasks
    attempt_pass_rate: float | None  # passed attempts / counted attempts (pooled)
    pass_at_k: dict[int, float] = Field(default_factory=dict)
    pass_hat_k: dict[int, float] = Field(default_factory=dict)
    pass_hat_curve: list[float] = Field(default_factory=list)  # pass^k for k = 1..retention_k
    observed_k_of_k: Share
    retention_k: int | None
    retention: float | None
    signatures: dict[str, int] = Field(default_factory=dict)  # judged failures by signature (both views)
    finish_reasons: dict[str, int] = Field(default_factory=dict)
    cost: CostMetrics


class ViewMetrics(GroupMetrics):
    """A run's figures in a second view, overall and per domain."""

    per_domain: dict[str, GroupMetrics] = Field(default_factory=dict)


class RunMetrics(GroupMetrics):
    """A run's figures in the canonical view (its own fields) and in the
    diagnostic one (`diagnostic`)."""

    run: str  # label: manifest run_name, else the directory name
    path: str = ""
    agent: str | None = None
    harness: list[str] = Field(default_factory=list)  # interventions on (docs/harness.md)
    data_provenance: DataProvenance | None = None  # as recorded; None for older manifests
    # How its rubric questions were asked (the manifest's `rubric_judge`; json when it names
    # none), and the attempts whose row shows the rubric judge at work (`shows_rubric_judge`).
    rubric_judge: RubricStyle = UNRECORDED_RUBRIC_STYLE
    rubric_judged_attempts: int = 0
    model: str | None = None
    superseded_rows: int = 0
    colliding_rows: int = 0  # graded rows superseded: two graded attempts under one (task, repeat)
    part_way_rows: int = 0  # attempts that started part-way (prefix, fork): not in the figures
    errors_logged: int = 0  # lines in errors.jsonl
    retried_tries: int = 0  # tries that ended in a system error and were retried (rows' `retries`)
    spent: dict[str, RoleSpend] = Field(default_factory=dict)  # role -> all rows, all tries
    judge_errors: int = 0  # rubric replies the judge gave that could not be read
    judge_error_attempts: int = 0  # attempts with at least one
    system_error_causes: dict[str, int] = Field(default_factory=dict)  # bench.run.causes
    tokens_mean: dict[str, dict[str, float]] = Field(default_factory=dict)  # role -> per valid attempt
    timings_mean_s: dict[str, float] = Field(default_factory=dict)  # phase -> mean over valid attempts
    per_domain: dict[str, GroupMetrics] = Field(default_factory=dict)
    diagnostic: ViewMetrics | None = None  # the same figures with system errors excluded
    pareto: bool = False  # on the cost-per-success / pass@1 frontier of the compared runs
    # Attempts graded by a task's test function (their rows carry `reward`), and their
    # mean reward; a system error counts 0 (the canonical view). None: no such attempt.
    rewarded_attempts: int = 0
    mean_reward: float | None = None


# -- computation -------------------------------------------------------------


def tally(
    rows: Iterable[ResultRow],
    prices: Mapping[str, Price] | None = None,
    cost_roles: Sequence[str] = ("agent",),
    role_models: Mapping[str, str] | None = None,
    view: ScoreView = CANONICAL,
) -> dict[str, TaskTally]:
    """Per task counts and per attempt costs in `view`, in first-seen task order.
    In the canonical view a system error is a failed attempt costing what it spent."""
    prices = prices or {}
    out: dict[str, TaskTally] = {}
    for r in rows:
        t = out.get(r.task_id)
        if t is None:
            t = out[r.task_id] = TaskTally(task_id=r.task_id, domain=r.domain or UNKNOWN_DOMAIN)
        if r.system_error:
            t.system_errors += 1
            if not view.counts_errors_as_failures:
                continue
        t.attempts += 1
        t.passed += bool(r.passed) and not r.system_error  # a system error never passes
        t.costs.append(r.cost(prices, cost_roles, role_models))
    return out


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _cost_metrics(
    tasks: Sequence[TaskTally],
    pass_at_1: float | None,
    k_of_k: int,
    roles: Sequence[str],
    by_role: dict[str, float | None],
    spent_usd: float | None = None,
) -> CostMetrics:
    costs = [c for t in tasks for c in t.costs]
    unpriced = sum(c is None for c in costs)
    m = CostMetrics(
        roles=list(roles),
        priced=unpriced == 0,
        unpriced_attempts=unpriced,
        by_role=by_role,
        spent_usd=spent_usd,
    )
    if unpriced or not tasks:
        return m
    total = sum(c for c in costs if c is not None)
    task_means = [sum(c for c in t.costs if c is not None) / t.attempts for t in tasks]
    m.total_usd = total
    m.mean_per_attempt_usd = sum(task_means) / len(tasks)
    successes = len(tasks) * (pass_at_1 or 0.0)  # expected passes of one attempt per task
    m.per_success_usd = sum(task_means) / successes if successes > 0 else None
    m.per_reliable_task_usd = total / k_of_k if k_of_k > 0 else None
    return m


def group_metrics(
    tallies: Sequence[TaskTally],
    k: int,
    *,
    signatures: Mapping[str, int] | None = None,
    finish_reasons: Mapping[str, int] | None = None,
    cost_roles: Sequence[str] = ("agent",),
    cost_by_role: dict[str, float | None] | None = None,
    spent_usd: float | None = None,
    k_values: Sequence[int] = K_VALUES,
    view: ScoreView = CANONICAL,
) -> GroupMetrics:
    """Metrics over `tallies` (made in `view`) with `k` repeats asked per task."""
    valid = [t for t in tallies if t.attempts > 0]
    excluded = sorted(t.task_id for t in tallies if t.attempts == 0)
    short = sorted(t.task_id for t in tallies if t.attempts < k)
    counts = [t.attempts for t in valid]
    min_n = min(counts) if counts else 0
    rates = [t.passed / t.attempts for t in valid]
    p1 = _mean(rates)
    retention_k = min(k, min_n) if valid else None
    ks = sorted({*(x for x in k_values if x <= min_n), *([retention_k] if retention_k else [])})
    at_k = {x: sum(pass_at_k(t.attempts, t.passed, x) for t in valid) / len(valid) for x in ks}
    hat_k = {x: sum(pass_hat_k(t.attempts, t.passed, x) for t in valid) / len(valid) for x in ks}
    curve = (
        [sum(pass_hat_k(t.attempts, t.passed, x) for t in valid) / len(valid) for x in range(1, min_n + 1)]
        if valid
        else []
    )
    k_of_k = sum(t.passed == t.attempts for t in valid)
    retention = hat_k[retention_k] / p1 if retention_k and p1 else None
    attempts = sum(counts)
    passed = sum(t.passed for t in valid)
    return GroupMetrics(
        view=view,
        tasks=len(valid),
        attempts=attempts,
        passed_attempts=passed,
        system_errors=sum(t.system_errors for t in tallies),
        excluded_tasks=excluded,
        k=k,
        min_attempts=min_n,
        max_attempts=max(counts) if counts else 0,
        short_tasks=short,
        pass_at_1=p1,
        pass_at_1_ci=wilson_interval(p1, len(valid)) if p1 is not None else None,
        attempt_pass_rate=passed / attempts if attempts else None,
        pass_at_k=at_k,
        pass_hat_k=hat_k,
        pass_hat_curve=curve,
        observed_k_of_k=Share(count=k_of_k, share=k_of_k / len(valid) if valid else None),
        retention_k=retention_k,
        retention=retention,
        signatures=dict(sorted((signatures or {}).items(), key=lambda kv: (-kv[1], kv[0]))),
        finish_reasons=dict(sorted((finish_reasons or {}).items(), key=lambda kv: (-kv[1], kv[0]))),
        cost=_cost_metrics(valid, p1, k_of_k, cost_roles, dict(cost_by_role or {}), spent_usd),
    )


def role_spend(
    rows: Sequence[ResultRow], prices: Mapping[str, Price], role_models: Mapping[str, str]
) -> dict[str, RoleSpend]:
    """Per role, every token `rows` spent (system errors and retried tries included) and its cost."""
    out: dict[str, RoleSpend] = {}
    for r in rows:
        for usage in (r.usage, r.retried_usage):
            for role, u in usage.items():
                s = out.setdefault(role, RoleSpend())
                for f in TOKEN_FIELDS:
                    setattr(s, f, getattr(s, f) + getattr(u, f))
                calls = (u.model_extra or {}).get("calls")
                s.calls += calls if isinstance(calls, int) else 0
                c = u.cost(prices, role_models.get(role))
                s.usd = None if c is None or s.usd is None else s.usd + c
    return dict(sorted(out.items()))


def _role_totals(
    rows: Sequence[ResultRow], prices: Mapping[str, Price], role_models: Mapping[str, str]
) -> dict[str, float | None]:
    return {role: s.usd for role, s in role_spend(rows, prices, role_models).items()}


def _spent(
    rows: Sequence[ResultRow],
    prices: Mapping[str, Price],
    roles: Sequence[str],
    role_models: Mapping[str, str],
) -> float | None:
    """USD `roles` spent over `rows`, every try included; None when some of it is unpriced."""
    total = 0.0
    for r in rows:
        c = r.spent(prices, roles, role_models)
        if c is None:
            return None
        total += c
    return total


def _retries(row: ResultRow) -> int:
    n = (row.model_extra or {}).get("retries")
    return n if isinstance(n, int) and not isinstance(n, bool) else 0


def shows_rubric_judge(row: ResultRow) -> bool:
    """The row shows the rubric judge at work: its tokens (recorded whenever it was asked),
    a reply it could not read, or a rubric answered "no". A row of an older run whose
    rubrics all passed shows nothing (its judge recorded no tokens)."""
    return "judge" in row.usage or row.judge_errors > 0 or row.signature == "rubric_failed"


def rubric_judge_shown(manifest: Mapping[str, Any], rows: Iterable[ResultRow]) -> RubricStyle | None:
    """How a run's rubric questions were asked, to show beside its provenance: None when
    none of its rows shows the rubric judge at work."""
    if not any(shows_rubric_judge(r) for r in rows):
        return None
    return recorded_rubric_style(manifest.get("rubric_judge"))


def _dig(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict):
            return None
        data = data.get(key)
    return data


def manifest_repeats(manifest: Mapping[str, Any]) -> int | None:
    """The repeats per task a run asked for, if its manifest says."""
    for path in (("repeats",), ("k",), ("config", "repeats"), ("config", "k"), ("config", "run", "repeats")):
        v = _dig(dict(manifest), *path)
        if isinstance(v, int) and not isinstance(v, bool) and v >= 1:
            return v
    return None


def manifest_harness(manifest: Mapping[str, Any]) -> list[str]:
    """The harness interventions a run had on (`harness` in the manifest; none for older runs)."""
    value = manifest.get("harness")
    return [str(x) for x in value] if isinstance(value, list) else []


def manifest_prices(manifest: Mapping[str, Any]) -> dict[str, Price]:
    """The price table a run recorded (config.prices or config.models.prices)."""
    for path in (("config", "prices"), ("config", "models", "prices"), ("models", "prices"), ("prices",)):
        table = _dig(dict(manifest), *path)
        if isinstance(table, dict) and table:
            try:
                return {str(m): Price.model_validate(p) for m, p in table.items()}
            except ValueError:
                continue
    return {}


def manifest_role_models(manifest: Mapping[str, Any]) -> dict[str, str]:
    """role -> model name as recorded in the manifest's config, where present."""
    out: dict[str, str] = {}
    for role in ("agent", "user", "judge"):
        for path in (
            ("config", role, "model"),
            ("config", "models", role, "model"),
            ("models", role, "model"),
        ):
            v = _dig(dict(manifest), *path)
            if isinstance(v, str) and v:
                out[role] = v
                break
    return out


def _name(value: Any) -> str | None:
    if isinstance(value, str):
        return value or None
    if isinstance(value, dict):
        for key in ("name", "kind", "type", "model"):
            if isinstance(value.get(key), str):
                return str(value[key])
    return None


def run_metrics(
    rows: Sequence[ResultRow],
    *,
    label: str,
    k: int | None = None,
    manifest: Mapping[str, Any] | None = None,
    prices: Mapping[str, Price] | None = None,
    cost_roles: Sequence[str] = ("agent",),
    path: str = "",
    errors_logged: int = 0,
    superseded_rows: int = 0,
    colliding_rows: int = 0,
    part_way_rows: int = 0,
    replaced: Sequence[ResultRow] = (),
) -> RunMetrics:
    """All metrics of one run, overall and per domain, in the canonical view
    and (`diagnostic`) with system errors excluded (bench.report.views).

    `k` defaults to the manifest's repeats, else the most rows any task has.
    Prices: a row's recorded `cost_usd` wins; otherwise `prices` (overriding
    the manifest's table) prices the role's tokens by the model in the usage
    entry or, failing that, the manifest's model for that role. `replaced`: rows a
    later row superseded (a resumed run's): in no figure, but in what was spent.
    """
    manifest = dict(manifest or {})
    table = {**manifest_prices(manifest), **(prices or {})}
    role_models = manifest_role_models(manifest)
    rows = list(rows)
    if k is None:
        k = manifest_repeats(manifest) or max(Counter(r.task_id for r in rows).values(), default=1)
    sigs: dict[str, Counter[str]] = defaultdict(Counter)
    finishes: dict[str, Counter[str]] = defaultdict(Counter)
    domain_rows: dict[str, list[ResultRow]] = defaultdict(list)
    # what was spent: every row and the rows it superseded (all their tries)
    spending: dict[str, list[ResultRow]] = defaultdict(list)
    for r in [*rows, *replaced]:
        spending[r.domain or UNKNOWN_DOMAIN].append(r)
    for r in rows:
        d = r.domain or UNKNOWN_DOMAIN
        domain_rows[d].append(r)
        if r.system_error:
            continue
        if r.finish_reason:
            finishes[d][r.finish_reason] += 1
        if not r.passed:
            sigs[d][r.signature or UNLABELLED] += 1

    def merged(counters: dict[str, Counter[str]], domains: Iterable[str]) -> Counter[str]:
        out: Counter[str] = Counter()
        for d in domains:
            out.update(counters[d])
        return out

    def in_view(view: ScoreView) -> tuple[GroupMetrics, dict[str, GroupMetrics]]:
        tallies = tally(rows, table, cost_roles, role_models, view=view)
        per_domain = {
            d: group_metrics(
                [t for t in tallies.values() if t.domain == d],
                k,
                signatures=sigs[d],
                finish_reasons=finishes[d],
                cost_roles=cost_roles,
                cost_by_role=_role_totals(spending[d], table, role_models),
                spent_usd=_spent(spending[d], table, cost_roles, role_models),
                view=view,
            )
            for d in sorted(domain_rows)
        }
        overall = group_metrics(
            list(tallies.values()),
            k,
            signatures=merged(sigs, domain_rows),
            finish_reasons=merged(finishes, domain_rows),
            cost_roles=cost_roles,
            cost_by_role=_role_totals([*rows, *replaced], table, role_models),
            spent_usd=_spent([*rows, *replaced], table, cost_roles, role_models),
            view=view,
        )
        return overall, per_domain

    overall, per_domain = in_view(CANONICAL)
    diagnostic, diagnostic_domains = in_view(DIAGNOSTIC)
    valid = [r for r in rows if not r.system_error]
    tokens: dict[str, dict[str, float]] = {}
    for role in sorted({role for r in valid for role in r.usage}):
        us = [r.usage[role] for r in valid if role in r.usage]
        tokens[role] = {
            f: sum(getattr(u, f) for u in us) / len(valid)
            for f in ("input_tokens", "cached_tokens", "output_tokens")
        }
    phases = sorted({p for r in valid for p in r.timings})
    timings = {p: sum(r.timings[p] for r in valid if p in r.timings) / len(valid) for p in phases}
    rewards = [
        0.0 if r.system_error else float((r.model_extra or {}).get("reward") or 0.0)
        for r in rows
        if (r.system_error and r.cause == "test function") or "reward" in (r.model_extra or {})
    ]
    model = role_models.get("agent") or _name(manifest.get("model"))
    if model is None:
        seen = Counter(r.usage["agent"].model for r in valid if "agent" in r.usage and r.usage["agent"].model)
        model = seen.most_common(1)[0][0] if seen else None
    return RunMetrics(
        **overall.model_dump(),
        run=label,
        path=path,
        agent=_name(manifest.get("agent")),
        harness=manifest_harness(manifest),
        data_provenance=recorded_provenance(manifest),
        rubric_judge=recorded_rubric_style(manifest.get("rubric_judge")),
        rubric_judged_attempts=sum(shows_rubric_judge(r) for r in rows),
        model=model,
        superseded_rows=superseded_rows,
        colliding_rows=colliding_rows,
        part_way_rows=part_way_rows,
        errors_logged=errors_logged,
        retried_tries=sum(_retries(r) for r in rows),
        spent=role_spend([*rows, *replaced], table, role_models),
        judge_errors=sum(r.judge_errors for r in rows),
        judge_error_attempts=sum(r.judge_errors > 0 for r in rows),
        system_error_causes=count_causes(r.error_cause for r in rows if r.system_error),
        tokens_mean=tokens,
        timings_mean_s=timings,
        per_domain=per_domain,
        diagnostic=ViewMetrics(**diagnostic.model_dump(), per_domain=diagnostic_domains),
        rewarded_attempts=len(rewards),
        mean_reward=sum(rewards) / len(rewards) if rewards else None,
    )


def metrics_for_run(
    run: RunDir,
    *,
    label: str | None = None,
    k: int | None = None,
    prices: Mapping[str, Price] | None = None,
    cost_roles: Sequence[str] = ("agent",),
) -> RunMetrics:
    """`run_metrics` for a loaded run directory (label: run_name, else the directory name),
    over the attempts that started at the task's beginning (`RunDir.from_the_start`)."""
    name = label or _name(run.manifest.get("run_name")) or _dir_name(run.path)
    rows = run.from_the_start
    return run_metrics(
        rows,
        label=name,
        k=k,
        manifest=run.manifest,
        prices=prices,
        cost_roles=cost_roles,
        path=run.path,
        errors_logged=len(run.errors),
        superseded_rows=run.superseded,
        colliding_rows=run.collisions,
        part_way_rows=len(run.rows) - len(rows),
        replaced=run.replaced,
    )


def _dir_name(path: str) -> str:
    p = Path(path).resolve()
    return p.name or str(p)


def pareto_frontier(points: Mapping[str, tuple[float | None, float | None]]) -> list[str]:
    """Labels of the points (cost, score) no other point dominates (cost no
    higher and score no lower, one of them strictly); points with an unknown
    cost or score are not on it. Sorted by cost, then label."""
    known = {n: (c, s) for n, (c, s) in points.items() if c is not None and s is not None}
    front = [
        n
        for n, (c, s) in known.items()
        if not any((c2 <= c and s2 >= s) and (c2 < c or s2 > s) for m, (c2, s2) in known.items() if m != n)
    ]
    return sorted(front, key=lambda n: (known[n][0], n))


def mark_pareto(runs: Sequence[RunMetrics]) -> list[str]:
    """Set `pareto` on the runs on the cost-per-success / pass@1 frontier; returns their labels."""
    front = pareto_frontier({r.run: (r.cost.per_success_usd, r.pass_at_1) for r in runs})
    for r in runs:
        r.pareto = r.run in front
    return front
