"""bench.report.metrics and bench.run.results against hand-computed values."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import pytest

from bench.llm.config import Price
from bench.report.metrics import (
    GroupMetrics,
    mark_pareto,
    pareto_frontier,
    pass_at_k,
    pass_hat_k,
    run_metrics,
    wilson_interval,
)
from bench.report.tables import flag_lines
from bench.report.views import CANONICAL, DIAGNOSTIC
from bench.run.results import ResultRow, ResultsError, load_run, read_rows


def row(task: str, repeat: int, domain: str, passed: bool, **kw: Any) -> ResultRow:
    if not passed and not kw.get("system_error") and "signature" not in kw:
        kw["signature"] = "wrong_state_update"
    return ResultRow(task_id=task, repeat=repeat, domain=domain, passed=passed, **kw)


def agent(cost: float) -> dict[str, Any]:
    return {"agent": {"model": "m", "input_tokens": 100, "output_tokens": 10, "cost_usd": cost}}


# -- estimators --------------------------------------------------------------


def test_pass_at_k_edges() -> None:
    assert pass_at_k(5, 0, 1) == 0.0  # c = 0
    assert pass_at_k(5, 0, 5) == 0.0
    assert pass_at_k(5, 5, 1) == 1.0  # c = n
    assert pass_at_k(5, 5, 5) == 1.0
    assert pass_at_k(5, 2, 4) == 1.0  # k > n - c: every k-subset holds a pass
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - 3 / 10)  # 1 - C(3,2)/C(5,2)
    assert pass_at_k(20, 1, 10) == pytest.approx(0.5)  # 1 - C(19,10)/C(20,10)
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)


def test_pass_hat_k_edges() -> None:
    assert pass_hat_k(5, 0, 1) == 0.0
    assert pass_hat_k(5, 5, 5) == 1.0
    assert pass_hat_k(5, 2, 3) == 0.0  # c < k
    assert pass_hat_k(5, 2, 2) == pytest.approx(1 / 10)  # C(2,2)/C(5,2)
    assert pass_hat_k(20, 19, 10) == pytest.approx(0.5)  # C(19,10)/C(20,10)
    for n, c in [(1, 0), (1, 1), (7, 3), (20, 13)]:
        assert pass_at_k(n, c, 1) == pytest.approx(c / n) == pass_hat_k(n, c, 1)


@pytest.mark.parametrize("n,c,k", [(5, 2, 6), (5, 6, 1), (5, -1, 1), (0, 0, 1), (5, 2, 0)])
def test_estimators_reject_impossible_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        pass_at_k(n, c, k)
    with pytest.raises(ValueError):
        pass_hat_k(n, c, k)


def test_wilson_interval_known_values() -> None:
    lo, hi = wilson_interval(0.5, 10)
    assert (lo, hi) == (pytest.approx(0.23659, abs=1e-5), pytest.approx(0.76341, abs=1e-5))
    lo, hi = wilson_interval(0.0, 10)
    assert lo == 0.0 and hi == pytest.approx(0.27753, abs=1e-5)
    lo, hi = wilson_interval(1.0, 4)
    assert lo == pytest.approx(0.51010, abs=1e-5) and hi == 1.0
    with pytest.raises(ValueError):
        wilson_interval(0.5, 0)


# -- one run by hand -----------------------------------------------------------
# K = 4 repeats.
# A retail: P P P P                        n=4 c=4
# B retail: P F(tool_use) SYS P            n=3 c=2  (short)
# C travel: F(wsu) F(no_state_change) F(no signature) F(wsu)   n=4 c=0
# D travel: SYS SYS SYS SYS                excluded (no valid attempt)
# E travel: P F(incomplete_resolution) P P n=4 c=3
# Agent cost 0.10 per attempt, 0.20 for E, 0.05 for system errors.


def hand_rows() -> list[ResultRow]:
    rows = [row("A", i, "retail", True, usage=agent(0.1), finish_reason="done") for i in range(4)]
    rows += [
        row("B", 0, "retail", True, usage=agent(0.1)),
        row("B", 1, "retail", False, signature="tool_use", usage=agent(0.1)),
        row("B", 2, "retail", False, system_error=True, usage=agent(0.05)),
        row("B", 3, "retail", True, usage=agent(0.1)),
        row("C", 0, "travel", False, signature="wrong_state_update", usage=agent(0.1)),
        row("C", 1, "travel", False, signature="no_state_change", usage=agent(0.1)),
        row("C", 2, "travel", False, signature=None, usage=agent(0.1)),
        row("C", 3, "travel", False, signature="wrong_state_update", usage=agent(0.1)),
    ]
    rows += [row("D", i, "travel", False, system_error=True, usage=agent(0.05)) for i in range(4)]
    rows += [
        row("E", 0, "travel", True, usage=agent(0.2)),
        row("E", 1, "travel", False, signature="incomplete_resolution", usage=agent(0.2)),
        row("E", 2, "travel", True, usage=agent(0.2)),
        row("E", 3, "travel", True, usage=agent(0.2)),
    ]
    return rows


def test_run_metrics_by_hand_with_system_errors_excluded() -> None:
    """The diagnostic view: docs/metrics.md's worked example (system errors left out)."""
    run = run_metrics(hand_rows(), label="hand", manifest={"config": {"repeats": 4}})
    assert run.view == CANONICAL and run.diagnostic is not None
    m = run.diagnostic
    assert m.view == DIAGNOSTIC
    p1 = (1 + 2 / 3 + 0 + 3 / 4) / 4
    assert m.k == 4
    assert m.tasks == 4 and m.attempts == 15 and m.passed_attempts == 9
    assert m.system_errors == 5  # outside every denominator
    assert m.excluded_tasks == ["D"]
    assert m.short_tasks == ["B", "D"]
    assert (m.min_attempts, m.max_attempts) == (3, 4)
    assert m.pass_at_1 == pytest.approx(p1)
    assert m.attempt_pass_rate == pytest.approx(9 / 15)
    assert m.pass_at_1_ci == pytest.approx(wilson_interval(p1, 4))
    # k in {1,5,10,20} up to the smallest attempt count (3), plus retention_k = min(K, 3)
    assert m.retention_k == 3
    assert sorted(m.pass_at_k) == [1, 3] and sorted(m.pass_hat_k) == [1, 3]
    assert m.pass_at_k[3] == pytest.approx((1 + 1 + 0 + 1) / 4)
    assert m.pass_hat_k[3] == pytest.approx((1 + 0 + 0 + 1 / 4) / 4)
    assert m.pass_hat_k[1] == pytest.approx(p1) == m.pass_at_k[1]
    assert m.pass_hat_curve == pytest.approx([p1, (1 + 1 / 3 + 0 + 1 / 2) / 4, 0.3125])
    assert m.retention == pytest.approx(0.3125 / p1)
    assert m.observed_k_of_k.count == 1 and m.observed_k_of_k.share == pytest.approx(0.25)
    assert m.signatures == {
        "wrong_state_update": 2,
        "incomplete_resolution": 1,
        "no_state_change": 1,
        "tool_use": 1,
        "unlabelled": 1,
    }
    assert m.finish_reasons == {"done": 4}
    assert run.system_error_causes == {"other": 5}
    # cost: per task means 0.1, 0.1, 0.1, 0.2; all valid attempts 1.9; k/k tasks 1
    assert m.cost.priced
    assert m.cost.total_usd == pytest.approx(1.9)
    assert m.cost.mean_per_attempt_usd == pytest.approx(0.5 / 4)
    assert m.cost.per_success_usd == pytest.approx(0.5 / (4 * p1))
    assert m.cost.per_reliable_task_usd == pytest.approx(1.9)
    assert m.cost.by_role == {"agent": pytest.approx(1.9 + 5 * 0.05)}  # every row


def test_run_metrics_by_hand_canonical() -> None:
    """The canonical view of the same rows: each unresolved system error is a failed attempt.
    A 4/4, B 2/4, C 0/4, D 0/4 (all four system errors), E 3/4."""
    m = run_metrics(hand_rows(), label="hand", manifest={"config": {"repeats": 4}})
    p1 = (1 + 2 / 4 + 0 + 0 + 3 / 4) / 5
    assert p1 == pytest.approx(0.45)
    assert m.view == CANONICAL
    assert m.tasks == 5 and m.attempts == 20 and m.passed_attempts == 9
    assert m.system_errors == 5 and m.system_error_causes == {"other": 5}
    assert m.excluded_tasks == [] and m.short_tasks == []
    assert (m.min_attempts, m.max_attempts) == (4, 4)
    assert m.pass_at_1 == pytest.approx(p1) and m.attempt_pass_rate == pytest.approx(9 / 20)
    assert m.pass_at_1_ci == pytest.approx(wilson_interval(p1, 5))
    assert m.retention_k == 4 and sorted(m.pass_hat_k) == [1, 4]
    assert m.pass_at_k[4] == pytest.approx((1 + 1 + 0 + 0 + 1) / 5)
    assert m.pass_hat_k[4] == pytest.approx(1 / 5)
    assert m.retention == pytest.approx(0.2 / p1)
    assert m.observed_k_of_k.count == 1 and m.observed_k_of_k.share == pytest.approx(0.2)
    # signatures stay the judge's labels of judged failures; the errors are counted by cause
    assert sum(m.signatures.values()) == 6
    # cost: the system errors' spend counts; per task means A .1, B .0875, C .1, D .05, E .2
    means = 0.1 + (0.3 + 0.05) / 4 + 0.1 + 0.05 + 0.2
    assert m.cost.total_usd == pytest.approx(1.9 + 5 * 0.05)
    assert m.cost.per_success_usd == pytest.approx(means / (5 * p1))
    assert m.cost.per_reliable_task_usd == pytest.approx(2.15)
    # the canonical figures are never above the diagnostic ones on the same rows
    assert m.diagnostic is not None and m.diagnostic.pass_at_1 is not None
    assert m.pass_at_1 < m.diagnostic.pass_at_1


def test_an_unresolved_system_error_cannot_raise_a_score() -> None:
    """A failing attempt turned into a system error (say, by the agent's own load) leaves the
    canonical score where the failure had put it; only the diagnostic view rises."""
    failed = [row("A", 0, "retail", True), row("A", 1, "retail", False)]
    voided = [row("A", 0, "retail", True), row("A", 1, "retail", False, system_error=True)]
    a, b = run_metrics(failed, label="a", k=2), run_metrics(voided, label="b", k=2)
    assert a.pass_at_1 == b.pass_at_1 == 0.5 and b.observed_k_of_k.count == 0
    assert b.diagnostic is not None and b.diagnostic.pass_at_1 == 1.0
    # a row marked both passed and system error is not a pass
    odd = run_metrics([row("A", 0, "retail", True, system_error=True)], label="c")
    assert odd.pass_at_1 == 0.0


def test_without_system_errors_both_views_agree() -> None:
    m = run_metrics([r for r in hand_rows() if not r.system_error], label="clean", k=4)
    assert m.diagnostic is not None
    assert m.model_dump(include=set(GroupMetrics.model_fields) - {"view"}) == m.diagnostic.model_dump(
        include=set(GroupMetrics.model_fields) - {"view"}
    )
    for d, g in m.per_domain.items():
        assert g.model_dump(exclude={"view"}) == m.diagnostic.per_domain[d].model_dump(exclude={"view"})


def test_per_domain_by_hand() -> None:
    run = run_metrics(hand_rows(), label="hand", k=4)
    assert run.diagnostic is not None
    canonical_travel = run.per_domain["travel"]
    assert canonical_travel.tasks == 3 and canonical_travel.pass_at_1 == pytest.approx(0.75 / 3)
    assert canonical_travel.system_errors == 4 and canonical_travel.excluded_tasks == []
    m = run.diagnostic
    assert sorted(m.per_domain) == ["retail", "travel"]
    retail, travel = m.per_domain["retail"], m.per_domain["travel"]
    assert retail.tasks == 2 and retail.system_errors == 1 and retail.short_tasks == ["B"]
    assert retail.pass_at_1 == pytest.approx((1 + 2 / 3) / 2)
    assert retail.retention_k == 3 and retail.pass_hat_k[3] == pytest.approx(0.5)
    assert retail.observed_k_of_k.count == 1
    assert travel.tasks == 2 and travel.system_errors == 4 and travel.excluded_tasks == ["D"]
    assert travel.pass_at_1 == pytest.approx(0.375)
    assert travel.retention_k == 4 and sorted(travel.pass_hat_k) == [1, 4]
    assert travel.pass_hat_k[4] == 0.0 and travel.retention == 0.0
    assert travel.pass_at_k[4] == pytest.approx(0.5)
    assert travel.observed_k_of_k.count == 0 and travel.observed_k_of_k.share == 0.0
    assert travel.cost.per_reliable_task_usd is None  # no task passed k/k
    assert travel.cost.per_success_usd == pytest.approx((0.1 + 0.2) / (2 * 0.375))
    assert travel.signatures == {
        "wrong_state_update": 2,
        "incomplete_resolution": 1,
        "no_state_change": 1,
        "unlabelled": 1,
    }


def test_k_defaults_to_most_rows_per_task() -> None:
    rows = [row("A", i, "retail", True) for i in range(3)] + [row("B", 0, "retail", False)]
    m = run_metrics(rows, label="x")
    assert m.k == 3 and m.short_tasks == ["B"] and m.min_attempts == 1
    assert sorted(m.pass_hat_k) == [1] and m.retention_k == 1
    assert m.pass_at_1 == pytest.approx(0.5)  # per-task mean, not 3/4 pooled
    assert m.attempt_pass_rate == pytest.approx(0.75)


def test_k_values_up_to_smallest_attempt_count() -> None:
    rows = [row(t, i, "retail", i % 2 == 0) for t in ("A", "B") for i in range(12)]
    m = run_metrics(rows, label="x", k=12)
    assert sorted(m.pass_at_k) == [1, 5, 10, 12]
    assert m.pass_hat_k[5] == pytest.approx(math.comb(6, 5) / math.comb(12, 5))
    assert m.retention == pytest.approx(m.pass_hat_k[12] / 0.5) and m.pass_hat_k[12] == 0.0


def test_zero_successes_gives_no_cost_ratios() -> None:
    rows = [row(t, i, "retail", False, usage=agent(0.3)) for t in ("A", "B") for i in range(2)]
    m = run_metrics(rows, label="zero", k=2)
    assert m.pass_at_1 == 0.0 and m.retention is None
    assert m.cost.total_usd == pytest.approx(1.2)
    assert m.cost.per_success_usd is None and m.cost.per_reliable_task_usd is None
    assert m.pass_at_1_ci is not None and m.pass_at_1_ci[0] == 0.0


def test_only_system_errors() -> None:
    run = run_metrics([row("A", 0, "retail", False, system_error=True)], label="down")
    assert run.tasks == 1 and run.pass_at_1 == 0.0 and run.system_errors == 1  # canonical: a failure
    assert run.diagnostic is not None
    m = run.diagnostic
    assert m.tasks == 0 and m.system_errors == 1 and m.excluded_tasks == ["A"]
    assert m.pass_at_1 is None and m.pass_at_1_ci is None and m.retention is None
    assert m.pass_at_k == {} and m.observed_k_of_k.share is None
    assert m.cost.per_success_usd is None


def test_cost_from_price_table_and_unpriced_attempts() -> None:
    usage = {
        "agent": {"model": "big", "input_tokens": 1_000_000, "cached_tokens": 0, "output_tokens": 100_000},
        "user": {"input_tokens": 2_000_000, "output_tokens": 0},
    }
    rows = [row("A", 0, "retail", True, usage=usage), row("B", 0, "retail", False, usage=usage)]
    unpriced = run_metrics(rows, label="x")
    assert not unpriced.cost.priced and unpriced.cost.unpriced_attempts == 2
    assert unpriced.cost.per_success_usd is None and unpriced.cost.total_usd is None
    prices = {"big": Price(input=1.0, output=10.0), "small": Price(input=0.5, output=1.0)}
    m = run_metrics(rows, label="x", prices=prices)
    assert m.cost.priced and m.cost.total_usd == pytest.approx(4.0)  # 1 + 1 per attempt
    assert m.cost.per_success_usd == pytest.approx(2.0 * 2 / (2 * 0.5))
    assert m.cost.by_role == {"agent": pytest.approx(4.0), "user": None}  # user model unknown
    # the manifest names the user role's model and carries the price table
    manifest = {
        "config": {"user": {"model": "small"}, "prices": {k: v.model_dump() for k, v in prices.items()}}
    }
    both = run_metrics(rows, label="x", manifest=manifest, cost_roles=("agent", "user"))
    assert both.cost.total_usd == pytest.approx(2 * (2.0 + 1.0))
    assert both.cost.by_role == {"agent": pytest.approx(4.0), "user": pytest.approx(2.0)}
    assert both.model == "big"  # no agent model in the manifest: the usage entry's


def test_recorded_cost_wins_over_price_table() -> None:
    usage = {"agent": {"model": "big", "input_tokens": 1_000_000, "output_tokens": 0, "cost_usd": 0.25}}
    m = run_metrics(
        [row("A", 0, "retail", True, usage=usage)], label="x", prices={"big": Price(input=9, output=9)}
    )
    assert m.cost.total_usd == pytest.approx(0.25)


def test_pareto_frontier() -> None:
    points = {
        "a": (0.1, 0.5),
        "b": (0.2, 0.6),
        "c": (0.3, 0.55),  # dominated by b
        "d": (0.1, 0.4),  # dominated by a (same cost, lower score)
        "e": (None, 0.9),  # unknown cost: not on the frontier
        "f": (0.2, 0.6),  # ties b: neither dominates
        "g": (0.05, None),
    }
    assert pareto_frontier(points) == ["a", "b", "f"]
    assert pareto_frontier({}) == []
    assert pareto_frontier({"x": (1.0, 0.0)}) == ["x"]


def test_mark_pareto_over_runs() -> None:
    def run(name: str, p: float, cost: float) -> Any:
        rows = [row(f"t{i}", 0, "retail", i < p * 10, usage=agent(cost)) for i in range(10)]
        return run_metrics(rows, label=name, k=1)

    cheap, good, bad, zero = (
        run("cheap", 0.3, 0.01),
        run("good", 0.8, 0.05),
        run("bad", 0.2, 0.2),
        run("zero", 0, 0),
    )
    assert mark_pareto([cheap, good, bad, zero]) == ["cheap", "good"]
    assert (cheap.pareto, good.pareto, bad.pareto, zero.pareto) == (True, True, False, False)
    assert cheap.cost.per_success_usd == pytest.approx(0.01 / 0.3)


# -- ResultRow and the run directory ------------------------------------------------


def test_result_row_contract() -> None:
    r = ResultRow.model_validate(
        {
            "task_id": "t",
            "repeat": 2,
            "domain": "retail",
            "passed": False,
            "system_error": "docker down",
            "x": 1,
        }
    )
    assert r.system_error is True and r.error == "docker down" and not r.valid
    assert r.model_extra == {"x": 1}
    assert json.loads(r.to_json_line())["x"] == 1
    assert ResultRow.model_validate(
        {"task_id": "t", "repeat": 0, "domain": "d", "passed": True, "system_error": None}
    ).valid
    with pytest.raises(ValueError):
        ResultRow.model_validate({"task_id": "t", "repeat": 0, "passed": True})  # no domain
    with pytest.raises(ValueError):
        ResultRow.model_validate({"task_id": "t", "repeat": -1, "domain": "d", "passed": True})


def test_read_rows_names_the_bad_line(tmp_path: Path) -> None:
    good = row("A", 0, "retail", True).to_json_line()
    path = tmp_path / "results.jsonl"
    path.write_text(good + "\n{not json\n")
    with pytest.raises(ResultsError, match=r"results.jsonl:3: not JSON"):
        read_rows(path)
    path.write_text(good + json.dumps({"task_id": "B", "repeat": 0, "domain": "retail"}) + "\n")
    with pytest.raises(ResultsError, match=r"results.jsonl:2: passed: Field required"):
        read_rows(path)


def test_load_run_dedupes_and_reads_side_files(tmp_path: Path) -> None:
    rows = [
        row("A", 0, "retail", False, system_error=True),
        row("A", 1, "retail", True),
        row("A", 0, "retail", True),  # the resumed run re-ran repeat 0
    ]
    (tmp_path / "results.jsonl").write_text("".join(r.to_json_line() for r in rows))
    (tmp_path / "errors.jsonl").write_text('{"task_id": "A", "repeat": 0, "error": "boom"}\n')
    (tmp_path / "manifest.json").write_text(json.dumps({"run_name": "r1", "config": {"repeats": 2}}))
    run = load_run(tmp_path)
    assert run.superseded == 1 and len(run.rows) == 2 and all(r.passed for r in run.rows)
    assert run.collisions == 0  # a system error re-run is a retry, not a collision
    assert run.errors == [{"task_id": "A", "repeat": 0, "error": "boom"}]
    assert run.manifest["run_name"] == "r1"
    (tmp_path / "empty").mkdir()
    with pytest.raises(ResultsError, match=r"no results\.jsonl"):
        load_run(tmp_path / "empty")
    with pytest.raises(ResultsError, match="not a directory"):
        load_run(tmp_path / "missing")


def test_two_graded_rows_under_one_repeat_are_a_collision_the_report_names(tmp_path: Path) -> None:
    from bench.report.metrics import metrics_for_run
    from bench.report.tables import flag_lines

    rows = [row("A", 0, "retail", False), row("A", 0, "retail", True), row("A", 1, "retail", True)]
    (tmp_path / "results.jsonl").write_text("".join(r.to_json_line() for r in rows))
    run = load_run(tmp_path)
    assert run.superseded == 1 and run.collisions == 1
    metrics = metrics_for_run(run)
    assert metrics.colliding_rows == 1
    assert any("1 graded rows collide" in line for line in flag_lines(metrics))


def test_mean_reward_of_the_attempts_graded_by_a_test_function() -> None:
    rows = [
        row("f.py:a", 0, "retail", True, reward=0.5),
        row("f.py:a", 1, "retail", True, reward=1.0),
        row("f.py:b", 0, "retail", False, reward=0.0, test_line=7),
        row(
            "f.py:b", 1, "retail", False, system_error="boom", cause="test function"
        ),  # the test's own error: 0
        row("f.py:c", 0, "retail", True),  # natively graded: no reward
        row("f.py:c", 1, "retail", False, system_error="down", cause="model endpoint"),
    ]
    m = run_metrics(rows, label="r", k=2)
    assert (m.rewarded_attempts, m.mean_reward) == (4, 0.375)
    assert flag_lines(m)[0].startswith(
        "mean reward 0.375 over the 4 attempts graded by their task's test function"
    )
    assert run_metrics(rows[4:], label="r", k=2).mean_reward is None
