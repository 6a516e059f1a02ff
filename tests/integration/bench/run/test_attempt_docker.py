"""The attempt unit against the real local Docker provider: a spec shipped as
JSON runs the oracle in a real sandbox (cold, and from the warm pool), its
terminal state equals the golden end state replayed in a separate sandbox,
the grading path passes it, and no container or network of the run is left."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from pg_support import DEMO_PACK
from sandbox_containers import started_provider

from bench.dataset import load_benchmark
from bench.run.attempt import AttemptOutcome, AttemptSpec, attempt_spec
from bench.run.golden import GoldenStore
from bench.run.grading import grade
from bench.run.lifecycle import execute_attempt
from judge import GoldenState, state_hash
from sandbox import DockerProvider, ProxyServer, leftovers, new_id

pytestmark = pytest.mark.docker

TASK = "demo_travel.py:test_trv_broken_air_conditioning"


@pytest.mark.parametrize("warm", [0, 1], ids=["cold", "warm"])
def test_oracle_spec_in_a_docker_sandbox_ends_in_the_golden_state(
    base_images: dict[str, str], tmp_path: Path, warm: int
) -> None:
    bench = load_benchmark(DEMO_PACK)
    task = bench.task(TASK)
    run_id = new_id("run-it-attempt")
    golden_store = GoldenStore(bench, tmp_path / "golden", run_id=run_id)

    async def go() -> tuple[GoldenState, AttemptOutcome, DockerProvider]:
        async with started_provider(run_id, warm=warm) as provider:
            provider.plan({task.domain: 1})
            golden = await golden_store.get(task)
            spec = attempt_spec(
                bench,
                task,
                0,
                run_id=run_id,
                attempt_id=new_id("att-it"),
                agent="oracle",
                images=provider.images,
            )
            shipped = AttemptSpec.model_validate_json(spec.model_dump_json())
            with ProxyServer() as proxy:
                outcome = await execute_attempt(shipped, provider, proxy)
        return golden, outcome, provider

    golden, outcome, provider = asyncio.run(go())
    assert outcome.system_error is None, outcome.system_error.traceback if outcome.system_error else ""
    assert outcome.terminal_state is not None
    assert state_hash(outcome.terminal_state) == golden.golden_hash
    assert outcome.initial_state is not None and state_hash(outcome.initial_state) == golden.initial_hash
    assert outcome.calls and all(not c.failed for c in outcome.calls)
    assert outcome.timings["sandbox_start"] > 0 and provider.alive == 0
    graded = asyncio.run(
        grade(
            bench,
            task,
            golden,
            outcome.terminal_state,
            outcome.calls,
            initial=outcome.initial_state,
            final_message=outcome.final_message,
            skip_rubrics=True,  # the task has yes/no rubrics; no judge model here
        )
    )
    assert graded.verdict.passed and graded.verdict.strict and graded.rubrics_skipped
    assert leftovers(run_id) == ([], [])
