"""Every token spent reaches a row (issue 43, items 5-7 and 10): a system error's row
records what its trajectory spent and says `system_error`; a row carries the spend of
its retried tries beside its own; the rubric judge's tokens are the row's `judge`
usage; an unreadable judge reply is counted and never printed as the agent's "no";
every errors.jsonl line carries its timings."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from attempt_fakes import FakeProvider, golden_in_process

from bench.dataset import Benchmark, Task
from bench.llm.client import ModelEndpointError, Usage
from bench.llm.config import parse_models_config
from bench.rollout.trajectory import Trajectory
from bench.run.attempt import AttemptFailure, AttemptOutcome, AttemptSpec
from bench.run.coordinator import Coordinator, RunOptions
from bench.run.executor import LocalExecutor
from bench.run.golden import GoldenStore
from bench.run.grading import Graded, judge_spend
from bench.run.results import ResultRow, RoleUsage, read_rows
from bench.run.retries import RetryPolicy
from judge import RubricAnswer, Verdict

RUBRIC_TASK = "demo_retail.py:test_ret_change_of_mind_tablet"


def spent_trajectory(task_id: str) -> Trajectory:
    """What a try cut short by the agent's model endpoint recorded: 7 calls' tokens."""
    return Trajectory(
        task_id=task_id,
        agent="llm",
        finish_reason="system_error",
        usage={"agent": Usage(model="m", calls=7, input_tokens=17504, output_tokens=192)},
        cost_usd={"agent": 0.02},
        error="system error: ModelEndpointError: HTTP 500",
    )


class EndpointFailsFirst(LocalExecutor):
    """The first `fail` tries end as a model endpoint failure after spending tokens."""

    def __init__(self, provider: FakeProvider, fail: int):
        super().__init__(provider)
        self.fail = fail

    async def execute(self, spec: AttemptSpec) -> AttemptOutcome:
        if self.fail > 0:
            self.fail -= 1
            error = ModelEndpointError("HTTP 500", role="agent", model="m", base_url="u", attempts=7)
            return AttemptOutcome.of(
                spec,
                trajectory=spent_trajectory(spec.task_id),
                system_error=AttemptFailure.of(error),
                timings={"sandbox_start": 0.5, "agent": 3.0},
                phase="agent",
            )
        return await super().execute(spec)


def answers(questions: Sequence[str]) -> list[RubricAnswer]:
    """The first question answered yes, the others unreadable: 100 tokens each."""
    spent = {"input_tokens": 100, "output_tokens": 10, "cached_tokens": 40, "requests": 2}
    return [
        RubricAnswer(question=q, answer="yes", model="j", usage=spent)
        if i == 0
        else RubricAnswer(question=q, error="judge error: not JSON", model="j", usage=spent)
        for i, q in enumerate(questions)
    ]


def run(
    pack: Benchmark, provider: FakeProvider, make_database: Any, tmp_path: Path, *, fail: int, retries: int
) -> tuple[Task, list[ResultRow], list[dict[str, Any]], list[str]]:
    task = pack.task(RUBRIC_TASK)
    store = GoldenStore(pack, tmp_path / "golden", image_id="in-process", allow_replay=False)
    store.save(golden_in_process(make_database, pack, task, key=store.key(task)))
    opts = RunOptions(
        out=tmp_path / "run",
        agent="oracle",
        repeat=1,
        concurrency=1,
        retries=RetryPolicy(max_retries=retries, wait_first=0.01),
    )
    config = parse_models_config(
        {
            "judge": {"base_url": "http://127.0.0.1:9/v1", "model": "j"},
            "prices": {"j": {"input": 1, "output": 2}},
        }
    )
    seen: list[str] = []
    coordinator = Coordinator(
        pack,
        opts,
        config,
        executor=EndpointFailsFirst(provider, fail),
        golden=store,
        progress=lambda state, t, r, summary: seen.append(summary),
    )

    class Judge:
        async def __call__(self, questions: list[str], final_message: str) -> list[RubricAnswer]:
            return answers(questions)

        async def aclose(self) -> None:
            pass

    coordinator.judge = Judge()  # type: ignore[assignment]
    asyncio.run(coordinator.run([task]))
    errors = [json.loads(line) for line in (tmp_path / "run" / "errors.jsonl").read_text().splitlines()]
    return task, read_rows(tmp_path / "run" / "results.jsonl"), errors, seen


def test_a_graded_row_carries_its_retried_tries_spend_and_the_judges(
    pack: Benchmark, provider: FakeProvider, make_database: Any, tmp_path: Path
) -> None:
    _, [row], [error], seen = run(pack, provider, make_database, tmp_path, fail=1, retries=1)
    assert not row.system_error and (row.model_extra or {})["retries"] == 1
    # the row's own try: the oracle spent nothing, the judge 2 x (100 in, 10 out), priced by the config
    judge = row.usage["judge"]
    assert (judge.model, judge.input_tokens, judge.cached_tokens, judge.output_tokens) == ("j", 200, 80, 20)
    assert (judge.model_extra or {})["calls"] == 4 and judge.cost_usd == (200 * 1 + 20 * 2) / 1e6
    assert "agent" not in row.usage
    # the retried try's tokens, beside the row's own
    agent = row.retried_usage["agent"]
    assert (agent.input_tokens, agent.output_tokens, agent.cost_usd) == (17504, 192, 0.02)
    assert row.spent_usage["agent"].input_tokens == 17504
    assert row.spent({}, ("agent", "judge")) == 0.02 + judge.cost_usd
    # the judge's unreadable reply is counted, and printed as what it is
    assert row.judge_errors == 1 and row.passed is False and row.signature == "rubric_failed"
    assert seen[-1].startswith("fail [rubric_failed]; judge error: ") and "rubric no" not in seen[-1]
    # the retried try's line: what it measured and spent
    assert error["retried"] and error["timings"] == {
        "golden": error["timings"]["golden"],
        "sandbox_start": 0.5,
        "agent": 3.0,
    }
    assert error["usage"]["agent"]["input_tokens"] == 17504


def test_a_system_error_row_records_what_every_try_spent_and_says_system_error(
    pack: Benchmark, provider: FakeProvider, make_database: Any, tmp_path: Path
) -> None:
    _, [row], errors, seen = run(pack, provider, make_database, tmp_path, fail=5, retries=1)
    assert row.system_error and row.cause == "model endpoint" and row.finish_reason == "system_error"
    assert (row.usage["agent"].input_tokens, row.usage["agent"].output_tokens) == (17504, 192)
    assert row.retried_usage["agent"].input_tokens == 17504
    assert row.spent_usage["agent"].input_tokens == 2 * 17504
    assert [(e["try"], e["retried"]) for e in errors] == [(1, True), (2, False)]
    assert all(e["timings"]["agent"] == 3.0 for e in errors)  # the final line too
    assert seen[-1].startswith("system error: ModelEndpointError")


def test_old_rows_read_as_before_and_new_fields_appear_only_when_set() -> None:
    old = ResultRow.model_validate(
        {"task_id": "t", "repeat": 0, "domain": "d", "passed": True, "usage": {"agent": {"input_tokens": 5}}}
    )
    assert old.retried_usage == {} and old.judge_errors == 0 and old.spent_usage == old.usage
    line = json.loads(old.to_json_line())
    assert "retried_usage" not in line and "judge_errors" not in line


def test_the_judge_spend_is_the_answers_asked_now() -> None:
    verdict = Verdict(
        task_id="t", passed=True, strict=True, terminal_hash="", golden_hash="", initial_hash=""
    )
    asked = answers(["q1", "q2"])
    assert Graded(verdict=verdict, answers=asked, asked=True).judge_usage()["judge"].input_tokens == 200
    # answers recorded earlier and reused cost nothing now; answers without usage record none
    assert Graded(verdict=verdict, answers=asked).judge_usage() == {}
    assert judge_spend([RubricAnswer(question="q", answer="no", model="j")]) == {}
    # unpriced: the report prices the tokens by its table
    assert judge_spend(asked)["judge"].cost_usd is None


def test_spends_add_up_and_a_part_without_a_cost_leaves_it_to_the_table() -> None:
    a = RoleUsage(model="m", input_tokens=10, output_tokens=1, cost_usd=0.5)
    b = RoleUsage(model="n", input_tokens=20, cached_tokens=5, output_tokens=2, cost_usd=0.25)
    both = a.plus(b)
    assert (both.model, both.input_tokens, both.cached_tokens, both.output_tokens) == ("m,n", 30, 5, 3)
    assert both.cost_usd == 0.75
    assert a.plus(RoleUsage(model="m", input_tokens=1)).cost_usd is None
    assert a.plus(RoleUsage()).cost_usd == 0.5  # a part that spent nothing changes nothing
