"""`tbx compare`: the paired statistics against known answers, the flips,
the noise floor, the files and the command line (bench.report.compare,
bench.report.compare_render, bench.cli.compare)."""

from __future__ import annotations

import itertools
import json
from collections import Counter
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.cli.main import main
from bench.report.compare import (
    RunInfo,
    TaskPoint,
    bootstrap_means,
    compare_pair,
    compare_runs,
    noise_floor,
    pair_stats,
    percentile_interval,
    sign_flip_p_value,
)
from bench.report.metrics import GroupMetrics, run_metrics
from bench.report.views import CANONICAL, DIAGNOSTIC, ScoreView
from bench.run.results import ResultRow
from bench.view.site import SITE_MARKER
from bench.view.summary import task_href


def rows_from(outcomes: dict[str, list[bool | None]], domain: str = "retail") -> list[ResultRow]:
    """task -> per-repeat outcome (None: a system error) as result rows."""
    out = []
    for task, results in outcomes.items():
        dom = task.split(":")[0] if ":" in task else domain
        for i, passed in enumerate(results):
            out.append(
                ResultRow(
                    task_id=task, repeat=i, domain=dom, passed=bool(passed), system_error=passed is None
                )
            )
    return out


def sampled(rates: np.ndarray, k: int, rng: np.random.Generator) -> dict[str, list[bool | None]]:
    return {f"t{i}": [bool(x) for x in rng.random(k) < p] for i, p in enumerate(rates)}


def point(task: str, a: tuple[int, int], b: tuple[int, int], domain: str = "retail") -> TaskPoint:
    return TaskPoint(
        task_id=task, domain=domain, a_passed=a[0], a_attempts=a[1], b_passed=b[0], b_attempts=b[1]
    )


def write_run(root: Path, name: str, outcomes: dict[str, list[bool | None]], repeats: int) -> Path:
    d = root / name
    d.mkdir()
    rows = rows_from(outcomes)
    (d / "results.jsonl").write_text("".join(r.to_json_line() for r in rows))
    (d / "manifest.json").write_text(json.dumps({"run_name": name, "config": {"repeats": repeats}}))
    return d


# -- known answers -------------------------------------------------------------


def test_identical_outcomes_give_zero_deltas_and_p_one() -> None:
    outcomes = {"a": [True, False, True], "b": [False, False, False], "c": [True, True, True]}
    pair = compare_pair("A", rows_from(outcomes), 3, "B", rows_from(outcomes), 3)
    assert pair is not None
    assert pair.delta_pass_at_1 == 0 and pair.delta_pass_at_1_ci == (0.0, 0.0)
    assert pair.delta_pass_hat_k_ci == (0.0, 0.0) and pair.p_value == 1.0
    assert pair.flips.tasks() == set()


def test_same_distribution_intervals_cover_zero_and_p_is_large() -> None:
    """Two runs drawn from the same per-task pass probabilities (100 tasks × k=20):
    the 95% interval covers 0 about 95% of the time and p is not small."""
    covered, ps = 0, []
    trials = 40
    for trial in range(trials):
        rng = np.random.default_rng(1000 + trial)
        rates = rng.uniform(0.0, 1.0, 100)
        a, b = sampled(rates, 20, rng), sampled(rates, 20, rng)
        pair = compare_pair(
            "A", rows_from(a), 20, "B", rows_from(b), 20, bootstrap_resamples=1000, permutation_resamples=999
        )
        assert pair is not None and pair.tasks == 100
        lo, hi = pair.delta_pass_at_1_ci
        covered += lo <= 0 <= hi
        ps.append(pair.p_value)
    assert covered >= 0.85 * trials
    assert np.median(ps) > 0.2
    assert sum(p < 0.05 for p in ps) <= 0.15 * trials


def test_a_fifteen_point_effect_is_detected() -> None:
    rng = np.random.default_rng(7)
    rates = rng.uniform(0.1, 0.8, 100)
    a, b = sampled(rates, 20, rng), sampled(rates + 0.15, 20, rng)
    pair = compare_pair("A", rows_from(a), 20, "B", rows_from(b), 20)
    assert pair is not None
    lo, hi = pair.delta_pass_at_1_ci
    assert 0 < lo < pair.delta_pass_at_1 < hi
    assert pair.delta_pass_at_1 == pytest.approx(0.15, abs=0.04)
    assert pair.p_value < 0.001
    assert pair.k == 20


def test_same_seed_same_result_other_seed_other_draws() -> None:
    rng = np.random.default_rng(3)
    rates = rng.uniform(0, 1, 60)
    a, b = rows_from(sampled(rates, 10, rng)), rows_from(sampled(rates + 0.05, 10, rng))
    infos = [RunInfo(label="A", path="a", k=10, tasks=60), RunInfo(label="B", path="b", k=10, tasks=60)]
    first = compare_runs(list(zip(infos, (a, b), strict=True)), seed=11).model_dump()
    again = compare_runs(list(zip(infos, (a, b), strict=True)), seed=11).model_dump()
    other = compare_runs(list(zip(infos, (a, b), strict=True)), seed=12).model_dump()
    assert first == again
    assert first["pairs"][0]["delta_pass_at_1"] == other["pairs"][0]["delta_pass_at_1"]
    assert first["pairs"][0]["delta_pass_at_1_ci"] != other["pairs"][0]["delta_pass_at_1_ci"]


def test_bootstrap_distribution_of_three_tasks_matches_exact_enumeration() -> None:
    """3 tasks: the 27 equally likely ordered resamples give the exact distribution of the mean."""
    diffs = np.array([0.0, 0.5, 1.0])
    exact = Counter(round(float(np.mean(s)), 9) for s in itertools.product(diffs, repeat=3))
    draws = 60_000
    means = bootstrap_means(diffs, seed=5, resamples=draws)[:, 0]
    seen = Counter(round(float(m), 9) for m in means)
    assert set(seen) == set(exact)
    for value, count in exact.items():
        assert seen[value] / draws == pytest.approx(count / 27, abs=0.008), value
    # the interval is the empirical 2.5/97.5 percentiles of the same draws
    (lo, hi) = percentile_interval(means[:, None])[0]
    assert (lo, hi) == pytest.approx(tuple(np.quantile(means, [0.025, 0.975])))
    cdf, exact_lo, exact_hi = 0.0, None, None
    for value in sorted(exact):  # the exact 2.5% and 97.5% points: P(mean = 0) = 1/27 > 2.5%
        cdf += exact[value] / 27
        if exact_lo is None and cdf >= 0.025:
            exact_lo = value
        if exact_hi is None and cdf >= 0.975:
            exact_hi = value
    assert (lo, hi) == (exact_lo, exact_hi) == (0.0, 1.0)


def test_permutation_p_value_equals_exact_enumeration() -> None:
    diffs = [0.1, 0.25, -0.05, 0.3, 0.2, 0.0]  # five non-zero: 32 sign patterns
    nonzero = [d for d in diffs if d]
    observed = abs(np.mean(nonzero))
    extreme = sum(
        abs(np.mean([s * d for s, d in zip(signs, nonzero, strict=True)])) >= observed - 1e-12
        for signs in itertools.product((1, -1), repeat=len(nonzero))
    )
    assert sign_flip_p_value(diffs, seed=0) == pytest.approx(extreme / 32)
    assert extreme / 32 == pytest.approx(4 / 32)  # all positive or all but the -0.05 flipped, both signs
    assert sign_flip_p_value([0.0, 0.0], seed=0) == 1.0


# -- properties ----------------------------------------------------------------

tasks_strategy = st.lists(
    st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=1, max_size=12
)  # per task: passes of 4 in A, in B


@settings(max_examples=40, deadline=None)
@given(tasks_strategy, st.integers(0, 2**16))
def test_swapping_runs_negates_every_delta(counts: list[tuple[int, int]], seed: int) -> None:
    points = [point(f"t{i}", (a, 4), (b, 4)) for i, (a, b) in enumerate(counts)]
    swapped = [point(p.task_id, (p.b_passed, 4), (p.a_passed, 4)) for p in points]
    s = pair_stats(points, 4, seed=seed, bootstrap_resamples=300, permutation_resamples=300)
    r = pair_stats(swapped, 4, seed=seed, bootstrap_resamples=300, permutation_resamples=300)
    assert s is not None and r is not None
    assert s.delta_pass_at_1 == pytest.approx(-r.delta_pass_at_1)
    assert s.delta_pass_hat_k == pytest.approx(-r.delta_pass_hat_k)
    assert s.delta_pass_at_1_ci == pytest.approx((-r.delta_pass_at_1_ci[1], -r.delta_pass_at_1_ci[0]))
    assert s.p_value == pytest.approx(r.p_value)
    if len(points) == 1:  # one task: every resample is that task
        assert s.delta_pass_at_1_ci == pytest.approx((s.delta_pass_at_1, s.delta_pass_at_1))
    assert 0 < s.p_value <= 1


@settings(max_examples=30, deadline=None)
@given(
    st.dictionaries(
        st.sampled_from([f"t{i}" for i in range(8)]),
        st.lists(st.sampled_from([True, False, None]), min_size=3, max_size=3),
        min_size=1,
    ),
    st.dictionaries(
        st.sampled_from([f"t{i}" for i in range(8)]),
        st.lists(st.sampled_from([True, False, None]), min_size=3, max_size=3),
        min_size=1,
    ),
)
def test_deltas_are_the_metrics_difference_on_shared_tasks(
    a: dict[str, list[bool | None]], b: dict[str, list[bool | None]]
) -> None:
    """One source per fact: a delta is bench.report.metrics' value of B minus A's, on the shared
    tasks, in either view (canonical: a system error is a failed attempt; diagnostic: left out)."""
    for view in (CANONICAL, DIAGNOSTIC):
        _delta_is_metrics_difference(rows_from(a), rows_from(b), view)


def _delta_is_metrics_difference(ra: list[ResultRow], rb: list[ResultRow], view: ScoreView) -> None:
    pair = compare_pair("A", ra, 3, "B", rb, 3, view, bootstrap_resamples=50, permutation_resamples=50)
    counted_a = {r.task_id for r in ra if r.valid or view.counts_errors_as_failures}
    counted_b = {r.task_id for r in rb if r.valid or view.counts_errors_as_failures}
    shared = counted_a & counted_b
    if not shared:
        assert pair is None
        return
    assert pair is not None
    assert set(pair.only_in_a) == counted_a - counted_b and set(pair.only_in_b) == counted_b - counted_a

    def metrics(rows: list[ResultRow], label: str) -> GroupMetrics:
        m = run_metrics([r for r in rows if r.task_id in shared], label=label, k=3)
        assert m.diagnostic is not None
        return m if view is CANONICAL else m.diagnostic

    ma, mb = metrics(ra, "A"), metrics(rb, "B")
    assert ma.view == mb.view == view
    assert ma.pass_at_1 is not None and mb.pass_at_1 is not None
    assert pair.delta_pass_at_1 == pytest.approx(mb.pass_at_1 - ma.pass_at_1)
    assert pair.k == min(ma.retention_k or 3, mb.retention_k or 3)
    assert pair.delta_pass_hat_k == pytest.approx(
        mb.pass_hat_curve[pair.k - 1] - ma.pass_hat_curve[pair.k - 1]
    )
    assert ma.observed_k_of_k.share is not None and mb.observed_k_of_k.share is not None
    assert pair.delta_observed_k_of_k == pytest.approx(mb.observed_k_of_k.share - ma.observed_k_of_k.share)


# -- flips, missing tasks, domains, noise floor ----------------------------------


def test_flips_missing_tasks_and_domains() -> None:
    a = {
        "retail:keep": [True, True],
        "retail:lost": [True, True],  # reliable in A only
        "travel:won": [False, False],  # solved only in B
        "travel:half": [True, False],  # solved in both, reliable in neither
        "travel:only_a": [True, True],
        "travel:errs_in_b": [True, True],
    }
    b = {
        "retail:keep": [True, True],
        "retail:lost": [True, False],
        "travel:won": [False, True],
        "travel:half": [False, True],
        "retail:only_b": [False, False],
        "travel:errs_in_b": [None, None],  # no valid attempt: not compared
    }
    # canonical (the default): B's two system errors are two failed attempts of a shared task
    canonical = compare_pair("A", rows_from(a), 2, "B", rows_from(b), 2)
    assert canonical is not None and canonical.tasks == 5 and canonical.only_in_a == ["travel:only_a"]
    assert "travel:errs_in_b" in canonical.flips.reliable_only_in_a
    assert "travel:errs_in_b" in canonical.flips.solved_only_in_a
    # diagnostic: not compared
    pair = compare_pair("A", rows_from(a), 2, "B", rows_from(b), 2, DIAGNOSTIC)
    assert pair is not None and pair.tasks == 4
    assert pair.flips.reliable_only_in_a == ["retail:lost"]
    assert pair.flips.reliable_only_in_b == []
    assert pair.flips.solved_only_in_a == []
    assert pair.flips.solved_only_in_b == ["travel:won"]
    assert pair.only_in_a == ["travel:errs_in_b", "travel:only_a"]
    assert pair.only_in_b == ["retail:only_b"]
    assert set(pair.per_domain) == {"retail", "travel"}
    assert pair.per_domain["retail"].tasks == 2
    assert pair.per_domain["retail"].delta_pass_at_1 == pytest.approx((0 + (-0.5)) / 2)
    assert pair.per_domain["travel"].delta_pass_at_1 == pytest.approx((0.5 + 0) / 2)


def test_noise_floor_splits_repeats_in_halves() -> None:
    # K=4: repeats 0,1 against 2,3; "early" passes only in the first half
    rows = rows_from({"early": [True, True, False, False], "steady": [True, True, True, True]})
    floor = noise_floor(rows, "A", 4)
    assert floor.split == 2 and floor.stats is not None
    assert floor.stats.tasks == 2 and floor.stats.k == 2
    assert floor.stats.delta_pass_at_1 == pytest.approx(-0.5)
    assert floor.stats.pass_at_1_a == 1.0 and floor.stats.pass_at_1_b == 0.5
    assert "too few" not in (floor.note or "")
    one = noise_floor(rows_from({"x": [True]}), "B", 1)
    assert one.stats is None and one.note and "fewer than two repeats" in one.note


# -- files and command line ------------------------------------------------------


def make_pair(tmp_path: Path) -> tuple[Path, Path]:
    rng = np.random.default_rng(0)
    rates = rng.uniform(0, 1, 12)
    a = {f"retail:{i}": v for i, v in enumerate(sampled(rates, 4, rng).values())}
    b = {f"retail:{i}": v for i, v in enumerate(sampled(np.minimum(rates + 0.3, 1), 4, rng).values())}
    a["retail:0"], b["retail:0"] = [True] * 4, [True, False, True, True]  # a reliable flip
    a["retail:gone"] = [True] * 4
    return write_run(tmp_path, "base", a, 4), write_run(tmp_path, "better", b, 4)


def test_cli_writes_files_and_json_fields(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    da, db = make_pair(tmp_path)
    out = tmp_path / "cmp"
    assert main(["compare", str(da), str(db), "--out", str(out), "--seed", "3"]) == 0
    printed = capsys.readouterr().out
    assert "base" in printed and "better" in printed and "retail:0" in printed
    data: dict[str, Any] = json.loads((out / "compare.json").read_text())
    pair = data["pairs"][0]
    for key in (
        "a",
        "b",
        "tasks",
        "delta_pass_at_1",
        "delta_pass_at_1_ci",
        "delta_pass_hat_k",
        "delta_pass_hat_k_ci",
        "p_value",
        "flips",
        "noise_floor",
    ):
        assert key in pair, key
    assert (pair["a"], pair["b"], pair["tasks"], data["seed"]) == ("base", "better", 12, 3)
    assert "retail:0" in pair["flips"]["reliable_only_in_a"]
    assert pair["only_in_a"] == ["retail:gone"]
    assert set(pair["noise_floor"]) == {"base", "better"}
    assert pair["noise_floor"]["base"]["split"] == 2
    md = (out / "compare.md").read_text()
    assert "## better vs base" in md and "`retail:0`" in md and "Not compared" in md
    page = (out / "compare.html").read_text()
    assert page.count('data-figure="scatter"') == 1 and 'class="point flipped"' in page
    assert "<script" not in page and "<link" not in page

    assert main(["compare", str(da), str(db), "--json", "--seed", "3"]) == 0
    printed_json = json.loads(capsys.readouterr().out)
    assert printed_json["pairs"][0]["delta_pass_at_1_ci"] == pair["delta_pass_at_1_ci"]


def test_cli_links_flipped_tasks_to_a_view(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    da, db = make_pair(tmp_path)
    view = da / "view"
    (view / "tasks").mkdir(parents=True)
    (view / SITE_MARKER).write_text("written by tbx view\n")
    (view / task_href("retail:0")).write_text("<html></html>")
    out = tmp_path / "cmp"
    assert main(["compare", str(da), str(db), "--out", str(out)]) == 0
    capsys.readouterr()
    pair = json.loads((out / "compare.json").read_text())["pairs"][0]
    href = pair["links"]["retail:0"]["base"]
    assert (out / href).resolve() == (view / task_href("retail:0")).resolve()
    assert f'href="{href}"' in (out / "compare.html").read_text()


def test_three_runs_give_three_pairs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    da, db = make_pair(tmp_path)
    dc = write_run(tmp_path, "third", {"retail:1": [True] * 4, "retail:2": [False] * 4}, 4)
    assert main(["compare", str(da), str(db), str(dc), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [(p["a"], p["b"]) for p in data["pairs"]] == [
        ("base", "better"),
        ("base", "third"),
        ("better", "third"),
    ]
    assert data["pairs"][1]["tasks"] == 2


def test_cli_errors(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    da, _ = make_pair(tmp_path)
    assert main(["compare", str(da)]) == 2
    assert "at least two" in capsys.readouterr().err
    assert main(["compare", str(da), str(tmp_path / "nope")]) == 2
    assert "not a directory" in capsys.readouterr().err
    other = write_run(tmp_path, "other", {"travel:x": [True]}, 1)
    assert main(["compare", str(da), str(other)]) == 2
    assert "share no task" in capsys.readouterr().err


def _set_manifest(run: Path, **fields: Any) -> None:
    path = run / "manifest.json"
    path.write_text(json.dumps({**json.loads(path.read_text()), **fields}))


def test_cli_says_it_pairs_the_canonical_view(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_run(tmp_path, "a", {"t1": [True, True], "t2": [True, False]}, 2)
    b = write_run(tmp_path, "b", {"t1": [True, None], "t2": [True, False]}, 2)
    assert main(["compare", str(a), str(b), "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["view"] == "canonical" and "counts as a failed attempt" in data["view_label"]
    assert data["pairs"][0]["delta_pass_at_1"] == pytest.approx(-0.25)  # t1: 1 -> 1/2
    assert main(["compare", str(a), str(b), "--json", "--view", "errors_excluded"]) == 0
    diag = json.loads(capsys.readouterr().out)
    assert diag["view"] == "errors_excluded" and diag["pairs"][0]["delta_pass_at_1"] == 0.0
    out = tmp_path / "cmp"
    assert main(["compare", str(a), str(b), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "Scores paired: canonical: an unresolved system error counts as a failed attempt" in printed
    assert "Scores paired: canonical" in (out / "compare.md").read_text()
    assert 'data-view="canonical"' in (out / "compare.html").read_text()


def test_runs_of_different_datasets_are_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a = write_run(tmp_path, "a", {"t1": [True], "t2": [False]}, 1)
    b = write_run(tmp_path, "b", {"t1": [True], "t3": [False]}, 1)
    _set_manifest(a, dataset_hash="a" * 64)
    _set_manifest(b, dataset_hash="b" * 64)
    out = tmp_path / "cmp"
    assert main(["compare", str(a), str(b), "--out", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    warning = [line for line in captured.err.splitlines() if "warning" in line]
    assert len(warning) == 1 and "a" * 12 in warning[0] and "b" * 12 in warning[0]
    assert "different datasets" in warning[0] and "1 task ids they share" in warning[0]
    assert data["warnings"] == [warning[0].removeprefix("tbx compare: warning: ")]
    assert data["pairs"][0]["same_dataset"] is False
    assert [r["dataset_hash"] for r in data["runs"]] == ["a" * 64, "b" * 64]
    assert "different datasets" in (out / "compare.md").read_text()
    # the same dataset: no word
    _set_manifest(b, dataset_hash="a" * 64)
    assert main(["compare", str(a), str(b), "--json"]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err and json.loads(captured.out)["pairs"][0]["same_dataset"] is True
    # not one task id in common: refused, naming both datasets
    c = write_run(tmp_path, "c", {"x1": [True]}, 1)
    _set_manifest(c, dataset_hash="c" * 64)
    assert main(["compare", str(a), str(c)]) == 2
    err = capsys.readouterr().err
    assert "share no task id" in err and "a" * 12 in err and "c" * 12 in err and len(err.splitlines()) == 1


def test_runs_of_two_rubric_styles_are_warned_of(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Rubric verdicts asked in two styles do not compare: one warning line on stderr, in
    --json, compare.md and compare.html; the comparison still runs. None when neither run
    shows the rubric judge at work, or both asked in one style."""
    a = write_run(tmp_path, "a", {"t1": [True], "t2": [False]}, 1)
    b = write_run(tmp_path, "b", {"t1": [True], "t2": [False]}, 1)
    _set_manifest(b, rubric_judge="reference")  # a: written before the key, so json
    assert main(["compare", str(a), str(b), "--json"]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err and json.loads(captured.out)["warnings"] == []

    rows = [json.loads(line) for line in (a / "results.jsonl").read_text().splitlines()]
    rows[1]["signature"] = "rubric_failed"  # a rubric answered no: the judge was asked
    (a / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "cmp"
    assert main(["compare", str(a), str(b), "--out", str(out), "--json"]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)
    warning = [line for line in captured.err.splitlines() if "warning" in line]
    assert len(warning) == 1
    assert "a asked its rubric questions in the json style, b in the reference style" in warning[0]
    assert "not comparable (compared anyway" in warning[0]
    assert data["warnings"] == [warning[0].removeprefix("tbx compare: warning: ")]
    assert [(r["rubric_judge"], r["rubric_judged_attempts"]) for r in data["runs"]] == [
        ("json", 1),
        ("reference", 0),
    ]
    assert data["pairs"][0]["tasks"] == 2  # compared all the same
    assert "a asked its rubric questions in the json style" in (out / "compare.md").read_text()
    assert "a asked its rubric questions in the json style" in (out / "compare.html").read_text()

    _set_manifest(b, rubric_judge="json")
    assert main(["compare", str(a), str(b), "--json"]) == 0
    captured = capsys.readouterr()
    assert "warning" not in captured.err and json.loads(captured.out)["warnings"] == []


def test_terminal_output_escapes_recorded_ids(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A recorded id (a Session API client picks its session id) can hold terminal escapes."""
    hostile = "session:\x1b[2J\x1b]0;owned\x07\x1b[31mred\nforged line"
    a = write_run(tmp_path, "a\x1b[1mA", {hostile: [True, True], "t2": [True, False]}, 2)
    b = write_run(tmp_path, "b", {hostile: [False, False], "t2": [True, False]}, 2)
    _set_manifest(a, run_name="a\x1b[1mA")
    assert main(["compare", str(a), str(b), "--out", str(tmp_path / "cmp")]) == 0
    printed = capsys.readouterr().out
    assert "\x1b" not in printed and "\x07" not in printed
    assert "session:\\x1b[2J\\x1b]0;owned\\x07\\x1b[31mred\\nforged line" in printed
    assert "a\\x1b[1mA" in printed
    assert not any(line.startswith("forged line") for line in printed.splitlines())
