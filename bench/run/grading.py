"""The one grading path: a terminal state (plus the tool calls, the final
message and the rubric answers) against the task's golden end state.

`tbx run`'s coordinator grades each `AttemptOutcome` with it, `tbx env serve`
each episode, `tbx session-proxy --record` each session (`judged`: no rubric is
asked there) and `tbx judge regrade` each recorded attempt. It runs where the golden end states live;
nothing of it enters a sandbox.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import Any

from pydantic import BaseModel

from bench.dataset import Benchmark, Task
from bench.evaluator.context import native_effects, test_context
from bench.evaluator.functions import FunctionRunner, with_test_function
from bench.llm.config import ModelsConfig
from bench.rollout.trajectory import Trajectory
from bench.run.errors import GradingError, NoVerdictSource
from bench.run.results import RoleUsage
from judge import GoldenState, RubricAnswer, State, ToolCallView, Verdict, decide, limit_verdict
from servers.registry import load_domain

RubricJudgeFn = Callable[[list[str], str], Awaitable[list[RubricAnswer]]]

# Why a rubric task cannot be graded in `tbx run` and `tbx env serve` (both take --skip-rubrics).
NO_JUDGE = "task has rubrics but the config names no judge role (add one, or pass --skip-rubrics)"
NO_EVALUATOR = "the task is graded by its test function, and this grader runs none"


JUDGE_ROLE = "judge"  # the role the rubric judge's spend is recorded under (a row's `usage`)
# RubricAnswer.usage's keys (the judge's interface)
JUDGE_USAGE_KEYS = ("input_tokens", "cached_tokens", "output_tokens", "requests")


class Graded(BaseModel):
    verdict: Verdict
    answers: list[RubricAnswer] | None = None
    rubrics_skipped: bool = False
    asked: bool = False  # `answers` were asked of the judge now (not recorded ones reused)

    def judge_usage(self, prices: ModelsConfig | None = None) -> dict[str, RoleUsage]:
        """The judge's spend on the answers asked now, as a row's `usage` entry of the
        judge role (priced by `prices` when it has the model's price; else the report
        prices the tokens); empty when nothing was asked or no answer recorded tokens."""
        return judge_spend(self.answers or [], prices) if self.asked else {}


def judge_spend(answers: Sequence[RubricAnswer], prices: ModelsConfig | None = None) -> dict[str, RoleUsage]:
    """The tokens `answers` recorded (RubricAnswer.usage), summed under the judge role."""
    counted = [a for a in answers if a.usage is not None]
    if not counted:
        return {}
    total = {k: sum((a.usage or {}).get(k, 0) for a in counted) for k in JUDGE_USAGE_KEYS}
    model = ",".join(dict.fromkeys(a.model for a in counted if a.model)) or None
    cost = (
        prices.cost(model, total["input_tokens"], total["cached_tokens"], total["output_tokens"])
        if (prices is not None and model is not None)
        else None
    )
    usage = {f: total[f] for f in ("input_tokens", "cached_tokens", "output_tokens")}
    # `calls`: the model requests, as bench.llm.client.Usage counts them for the other roles
    return {
        JUDGE_ROLE: RoleUsage.model_validate(
            {"model": model, **usage, "cost_usd": cost, "calls": total["requests"]}
        )
    }


def task_rubrics(bench: Benchmark, task: Task) -> list[str]:
    return list(bench.effective_init(task).rubrics_yesno) if task.has_rubrics else []


def limited(
    bench: Benchmark,
    task: Task,
    golden: GoldenState,
    terminal: State | None,
    calls: Sequence[ToolCallView],
    cause: str,
    *,
    initial: State | None,
    domain: str | None = None,
) -> Graded:
    """An attempt whose own load hit a limit (`cause`): a failure with the signature
    `resource_limit` (judge.limit_verdict), its state's differences beside it when
    `terminal` could be read. No rubric is asked: nothing an answer says changes it."""
    from_state = None
    if terminal is not None:
        tables = load_domain(domain or task.domain).tables
        from_state = decide(task.id, tables, golden, terminal, list(calls), initial=initial)
    return Graded(verdict=limit_verdict(task.id, golden, cause, from_state))


async def grade(
    bench: Benchmark,
    task: Task,
    golden: GoldenState | None,
    terminal: State | None,
    calls: Sequence[ToolCallView],
    *,
    initial: State | None,
    final_message: str | None,
    domain: str | None = None,
    recorded: list[RubricAnswer] | None = None,
    judge: RubricJudgeFn | None = None,
    skip_rubrics: bool = False,
    no_judge: str = NO_JUDGE,
    resource_limit: str | None = None,
    functions: FunctionRunner | None = None,
    trajectory: Trajectory | None = None,
    attempt_id: str = "",
    server_effects: Mapping[str, Any] | None = None,
    init_results: Mapping[str, Any] | None = None,
    finish_reason: str | None = None,
) -> Graded:
    """Rubric answers: `recorded` ones when they answer this task's questions,
    else asked of `judge`; neither raises GradingError(`no_judge`).
    `skip_rubrics` judges a rubric task on state alone (and says so).
    `resource_limit`: the attempt's own load hit a limit (why): `limited`. Without
    it a terminal state is required (GradingError). `finish_reason` `context_limit`
    (the agent filled its model's context): graded on its state like a `timeout`,
    a failure's signature is `context_limit`.
    A task graded by its test function (Task.runs_function) is run by `functions`
    (bench.evaluator) on the attempt's context: the test asks its own judge questions,
    so no rubric is asked here. `server_effects` / `init_results`: what a checkout's own
    servers reported (`AttemptOutcome.server_effects` / `.init_results`), beside the
    native domains' Bench effects. `golden` None: the task runs on its checkout's own
    servers (no golden calls): `on_checkout_servers`."""
    if golden is None:
        graded = await on_checkout_servers(
            task,
            calls,
            final_message=final_message,
            resource_limit=resource_limit,
            functions=functions,
            trajectory=trajectory,
            attempt_id=attempt_id,
            server_effects=server_effects,
            init_results=init_results,
        )
    elif task.runs_function and resource_limit is None and terminal is not None:
        if functions is None:
            raise GradingError(f"{task.id}: {NO_EVALUATOR}")
        graded = await run_function(
            functions,
            task,
            judged(bench, task, golden, terminal, calls, initial=initial, domain=domain).verdict,
            {**native_effects(bench, task, golden, initial, terminal), **(server_effects or {})},
            calls,
            trajectory=trajectory,
            final_message=final_message,
            attempt_id=attempt_id,
            init_results=init_results,
        )
    else:
        graded = await _grade(
            bench,
            task,
            golden,
            terminal,
            calls,
            initial=initial,
            final_message=final_message,
            domain=domain,
            recorded=recorded,
            judge=judge,
            skip_rubrics=skip_rubrics,
            no_judge=no_judge,
            resource_limit=resource_limit,
        )
    verdict = graded.verdict
    if finish_reason == "context_limit" and not verdict.passed and verdict.signature != "resource_limit":
        graded.verdict = verdict.model_copy(update={"signature": "context_limit"})
    return graded


def stateless_verdict(task_id: str, resource_limit: str | None = None) -> Verdict:
    """The verdict frame of a task without a golden state (its checkout's own servers):
    no hashes, no differences; failed with `resource_limit` when the attempt's own load
    hit a limit, else what its test function says fills it (with_test_function)."""
    return Verdict(
        task_id=task_id,
        passed=False,
        strict=False,
        terminal_hash="",
        golden_hash="",
        initial_hash="",
        signature="resource_limit" if resource_limit is not None else None,
        resource_limit=resource_limit,
    )


async def on_checkout_servers(
    task: Task,
    calls: Sequence[ToolCallView],
    *,
    final_message: str | None,
    resource_limit: str | None,
    functions: FunctionRunner | None,
    trajectory: Trajectory | None,
    attempt_id: str,
    server_effects: Mapping[str, Any] | None,
    init_results: Mapping[str, Any] | None,
) -> Graded:
    """A task on its checkout's own servers: its test function on the servers' own
    effects (`x.effects[server]`), no golden state. Without a test function, or without
    an evaluator to run it, nothing can score it: NoVerdictSource (a system error)."""
    if not task.runs_function:
        raise NoVerdictSource(
            f"{task.id} runs on its checkout's own servers ({task.domain}) and has no test function: "
            "no golden calls and no check to run, not scored"
        )
    if functions is None:
        raise NoVerdictSource(f"{task.id}: {NO_EVALUATOR}")
    if resource_limit is not None:
        return Graded(verdict=stateless_verdict(task.id, resource_limit))
    return await run_function(
        functions,
        task,
        stateless_verdict(task.id),
        dict(server_effects or {}),
        calls,
        trajectory=trajectory,
        final_message=final_message,
        attempt_id=attempt_id,
        init_results=init_results,
    )


async def run_function(
    functions: FunctionRunner,
    task: Task,
    frame: Verdict,
    effects: dict[str, Any],
    calls: Sequence[ToolCallView],
    *,
    trajectory: Trajectory | None,
    final_message: str | None,
    attempt_id: str,
    init_results: Mapping[str, Any] | None,
) -> Graded:
    """The task's test function on the attempt's context (`effects`: `x.effects`), its
    result folded into `frame` (the state's verdict, or a stateless one)."""
    context = test_context(
        effects=effects,
        trajectory=trajectory,
        calls=calls,
        final_message=final_message,
        session_id=attempt_id,
        init_result=init_results or None,
    )
    result = await functions.run(task, context)
    return Graded(verdict=with_test_function(task.id, frame, result))


async def _grade(
    bench: Benchmark,
    task: Task,
    golden: GoldenState,
    terminal: State | None,
    calls: Sequence[ToolCallView],
    *,
    initial: State | None,
    final_message: str | None,
    domain: str | None,
    recorded: list[RubricAnswer] | None,
    judge: RubricJudgeFn | None,
    skip_rubrics: bool,
    no_judge: str,
    resource_limit: str | None,
) -> Graded:
    if resource_limit is not None or terminal is None:  # no rubric is asked for either
        return judged(
            bench,
            task,
            golden,
            terminal,
            calls,
            initial=initial,
            domain=domain,
            resource_limit=resource_limit,
        )
    rubrics = task_rubrics(bench, task)
    skipped = bool(rubrics) and skip_rubrics
    if skipped:
        rubrics = []
    answers: list[RubricAnswer] | None = None
    asked = False
    if rubrics:
        if recorded is not None and [a.question for a in recorded] == rubrics:
            answers = recorded
        elif judge is not None:
            answers = await judge(rubrics, final_message or "")
            asked = True
        else:
            raise GradingError(no_judge)
    graded = judged(
        bench,
        task,
        golden,
        terminal,
        calls,
        initial=initial,
        domain=domain,
        rubrics=rubrics,
        answers=answers,
        rubrics_skipped=skipped,
    )
    graded.asked = asked
    return graded


def judged(
    bench: Benchmark,
    task: Task,
    golden: GoldenState,
    terminal: State | None,
    calls: Sequence[ToolCallView],
    *,
    initial: State | None,
    domain: str | None = None,
    rubrics: Sequence[str] = (),
    answers: list[RubricAnswer] | None = None,
    rubrics_skipped: bool = False,
    resource_limit: str | None = None,
) -> Graded:
    """The verdict once the rubric answers are in (`grade` asks for them; a caller that
    asks none, such as the Session API's recorder whose harness keeps the rubrics, comes
    here directly, in any thread). `resource_limit`: as in `grade`."""
    if resource_limit is not None:
        return limited(bench, task, golden, terminal, calls, resource_limit, initial=initial, domain=domain)
    if terminal is None:
        raise GradingError(f"{task.id}: the attempt has no terminal state to grade")
    verdict = decide(
        task.id,
        load_domain(domain or task.domain).tables,
        golden,
        terminal,
        list(calls),
        initial=initial,
        rubrics=list(rubrics),
        rubric_answers=answers,
    )
    return Graded(verdict=verdict, answers=answers, rubrics_skipped=rubrics_skipped)
