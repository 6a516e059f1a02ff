"""One model attempt of a harness test: a demo task on the local Docker provider
(no warm pool) through a given tool proxy, with its golden end state replayed
in a sandbox of its own, graded without rubrics. Shared by the harness tests
(approval, error hints, state check), which differ in the model's script, the
harness and what they assert."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sandbox_containers import started_provider

from bench.dataset import Benchmark, Task
from bench.llm.config import ModelsConfig
from bench.run.attempt import AttemptOutcome, attempt_spec
from bench.run.golden import GoldenStore
from bench.run.grading import grade
from bench.run.lifecycle import execute_attempt
from judge import GoldenState
from sandbox import ProxyServer, new_id


@dataclass
class GradedAttempt:
    outcome: AttemptOutcome
    golden: GoldenState
    passed: bool


async def graded_attempt(
    bench: Benchmark,
    task: Task,
    *,
    run_id: str,
    models: ModelsConfig,
    harness: list[str],
    proxy: ProxyServer,
    golden_dir: Path,
) -> GradedAttempt:
    """Run and grade one attempt; the provider is closed and `run_id` swept whatever happens."""
    golden_store = GoldenStore(bench, golden_dir, run_id=run_id)
    async with started_provider(run_id, warm=0) as provider:
        provider.plan({task.domain: 1})
        golden = await golden_store.get(task)
        spec = attempt_spec(
            bench,
            task,
            0,
            run_id=run_id,
            attempt_id=new_id("att-it"),
            agent="demo",
            models=models,
            images=provider.images,
            harness=harness,
        )
        outcome = await execute_attempt(spec, provider, proxy)
    assert outcome.system_error is None, outcome.system_error
    assert outcome.terminal_state is not None
    graded = await grade(
        bench,
        task,
        golden,
        outcome.terminal_state,
        outcome.calls,
        initial=outcome.initial_state,
        final_message=outcome.final_message,
        skip_rubrics=True,
    )
    return GradedAttempt(outcome, golden, graded.verdict.passed)
