"""The Inspect metrics of tbx/thinkingbox_bench are `tbx report`'s (bench.report.metrics)
on the same attempts: epochs reduced by `tbx_epochs`, then pass@1, pass^k and k/k."""

from __future__ import annotations

import pytest

pytest.importorskip("inspect_ai")  # the `inspect` extra

from inspect_ai.scorer import SampleScore, Score

from bench.report.metrics import group_metrics, tally
from bench.run.results import ResultRow
from tbx.scorer import observed_k_of_k, pass_at_1, pass_hat_k, tbx_epochs

# task -> its attempts' verdicts over 4 epochs
PASSES = {
    "a": [True, True, True, True],
    "b": [True, False, True, True],
    "c": [False, False, False, False],
    "d": [False, True, False, False],
    "e": [True, True, True, False],
}


def sample_scores(passes: dict[str, list[bool]]) -> list[SampleScore]:
    reduce = tbx_epochs()
    return [
        SampleScore(
            score=reduce([Score(value=1.0 if p else 0.0) for p in verdicts]),
            sample_id=task,
            sample_metadata={"task_id": task, "domain": "retail" if task < "c" else "travel"},
        )
        for task, verdicts in passes.items()
    ]


def report_metrics(passes: dict[str, list[bool]]):  # type: ignore[no-untyped-def]
    rows = [
        ResultRow(task_id=task, repeat=i, domain="retail", passed=p)
        for task, verdicts in passes.items()
        for i, p in enumerate(verdicts)
    ]
    return group_metrics(list(tally(rows).values()), 4)


def test_the_metrics_are_tbx_reports_on_the_same_attempts() -> None:
    scores = sample_scores(PASSES)
    expected = report_metrics(PASSES)
    assert pass_at_1()(scores) == pytest.approx(expected.pass_at_1)
    assert pass_hat_k()(scores) == pytest.approx(expected.pass_hat_k[4])
    assert observed_k_of_k()(scores) == pytest.approx(expected.observed_k_of_k.share)
    # and the figures themselves: (1 + 3/4 + 0 + 1/4 + 3/4) / 5; only `a` passed 4/4
    assert pass_at_1()(scores) == pytest.approx(0.55)
    assert pass_hat_k()(scores) == pytest.approx(0.2)
    assert observed_k_of_k()(scores) == pytest.approx(0.2)


def test_the_reducer_keeps_the_counts_and_the_failure_signatures() -> None:
    reduced = tbx_epochs()(
        [Score(value=1.0), Score(value=0.0, metadata={"signature": "no_state_change"}), Score(value=1.0)]
    )
    assert reduced.value == pytest.approx(2 / 3)
    assert reduced.metadata == {"attempts": 3, "passed": 2, "signatures": ["no_state_change"]}


def test_unreduced_scores_count_one_attempt_each() -> None:
    # a sample scored without the reducer (one epoch, or another reducer's scores)
    scores = [
        SampleScore(score=Score(value=v), sample_id=t, sample_metadata={"task_id": t, "domain": "retail"})
        for t, v in (("a", 1.0), ("b", 0.0))
    ]
    assert pass_at_1()(scores) == pytest.approx(0.5)
    assert observed_k_of_k()(scores) == pytest.approx(0.5)
