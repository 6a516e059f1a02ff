"""A run survives the loss of an attempt's container (real Docker, real sandboxes).

The run's own DockerProvider is wrapped so that, once an attempt holds its
prepared sandbox (the checkout found it running; the attempt reads its initial
state), one of its containers is killed (SIGKILL from the daemon) or made to hit
its memory limit (the kernel's OOM killer takes the container's main process).
That try must end as a system error whose reason names the container (role and
name) and how it died; the (task, repeat) is tried again in a fresh sandbox, the
run goes on, and in the end every (task, repeat) has exactly one row. (A set
lost before the checkout handed it over costs no try: test_kill_per_phase.py.)
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import docker
import pytest
from pg_support import DEMO_PACK

from bench.dataset import Benchmark, load_benchmark
from bench.run.coordinator import Coordinator, RunOptions
from bench.run.results import read_rows
from bench.run.retries import RetryPolicy
from sandbox import DockerProvider, SandboxLease, SandboxRequest, leftovers

pytestmark = pytest.mark.docker

TASK = "demo_retail.py:test_ret_expedite_headphones"
# Past the container's limit (Limits.memory, 512m); one container's limit, not the host's memory.
ALLOCATE = "x = bytearray(900 * 2**20)\nfor i in range(0, len(x), 4096): x[i] = 1"


class Saboteur(DockerProvider):
    """Sandboxes whose `role` container dies once the attempt holds them, as it reads
    the initial state (the first `times` checkouts): `how` is "kill" or "oom"."""

    def __init__(self, role: str, how: str, times: int):
        super().__init__()
        self.role, self.how, self.left = role, how, times
        self.victims: list[str] = []  # container names, in order

    async def checkout(self, request: SandboxRequest) -> SandboxLease:
        session = await super().checkout(request)
        if self.left > 0:
            self.left -= 1
            cid = session.containers[self.role]
            prepared_states = session.prepared_states

            async def struck(fingerprint: str) -> Mapping[str, Any] | None:
                self.victims.append(await asyncio.to_thread(self._strike, cid))
                return await prepared_states(fingerprint)

            session.prepared_states = struck  # type: ignore[method-assign]
        return session

    def _strike(self, cid: str) -> str:
        container = docker.from_env().containers.get(cid)
        if self.how == "kill":
            container.kill()
        else:
            # The server's own process is the one the OOM killer picks (its score raised,
            # as any process may raise its own), so the container dies of its limit.
            container.exec_run(["sh", "-c", "echo 1000 > /proc/1/oom_score_adj"])
            container.exec_run(["python", "-c", ALLOCATE])
        container.wait(timeout=30)
        return container.name


@pytest.fixture(scope="module")
def bench() -> Benchmark:
    return load_benchmark(DEMO_PACK, strict=False)


@pytest.fixture(scope="module")
def golden(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("golden")


def _run(
    bench: Benchmark, out: Path, golden: Path, provider: DockerProvider, repeat: int, setup_retries: int
) -> Coordinator:
    # The strikes land as the initial state is read, before the agent's first turn:
    # `--max-setup-retries` bounds those tries (bench.run.retries).
    opts = RunOptions(
        out=out,
        repeat=repeat,
        concurrency=1,
        skip_rubrics=True,
        golden_cache=golden,
        retries=RetryPolicy(max_setup_retries=setup_retries, wait_first=0.1),
    )
    coordinator = Coordinator(bench, opts, provider=provider)
    asyncio.run(coordinator.run([bench.task(TASK)]))
    return coordinator


def _errors(out: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in (out / "errors.jsonl").read_text().splitlines()]


@pytest.fixture
def no_leftovers() -> Iterator[list[str]]:
    runs: list[str] = []
    yield runs
    for run in runs:
        assert leftovers(run) == ([], []), f"run {run} left containers or networks"


@pytest.mark.parametrize(
    ("role", "how", "said"),
    [
        ("server-retail", "kill", "exited with code 137 (killed: SIGKILL)"),
        ("postgres", "kill", "exited with code 137 (killed: SIGKILL)"),
        ("typesense", "kill", "exited with code 137 (killed: SIGKILL)"),
        ("server-retail", "oom", "was OOM-killed: it hit its memory limit of 512 MiB"),
    ],
)
def test_a_killed_container_is_a_named_system_error_retried_and_the_run_goes_on(
    bench: Benchmark, golden: Path, tmp_path: Path, no_leftovers: list[str], role: str, how: str, said: str
) -> None:
    provider = Saboteur(role, how, times=1)
    coordinator = _run(bench, tmp_path / "run", golden, provider, repeat=2, setup_retries=2)
    no_leftovers.append(coordinator.run_id)
    [victim] = provider.victims

    rows = read_rows(tmp_path / "run" / "results.jsonl")
    assert sorted(r.repeat for r in rows) == [0, 1], "one row per (task, repeat)"
    assert all(r.passed and not r.system_error for r in rows), [r.error for r in rows]
    hit = next(r for r in rows if r.repeat == 0)
    extra = hit.model_extra or {}
    assert extra["retries"] == 1 and len(extra["retried_errors"]) == 1
    reason = extra["retried_errors"][0]
    assert f"its {role} container {victim} (" in reason and said in reason, reason
    assert (next(r for r in rows if r.repeat == 1).model_extra or {})["retries"] == 0

    [line] = _errors(tmp_path / "run")
    assert line["retried"] is True and line["error"] == reason and line["try"] == 1
    assert line["cause"] == "container" and line["retryable"] is True
    assert coordinator.counts["passed"] == 2 and coordinator.counts["retried"] == 1
    assert dict(coordinator.retried_causes) == {"container": 1} and not coordinator.error_causes


def test_retries_are_bounded_then_the_row_is_a_system_error(
    bench: Benchmark, golden: Path, tmp_path: Path, no_leftovers: list[str]
) -> None:
    provider = Saboteur("postgres", "kill", times=10)
    coordinator = _run(bench, tmp_path / "run", golden, provider, repeat=1, setup_retries=1)
    no_leftovers.append(coordinator.run_id)

    assert len(provider.victims) == 2, "the first try and one retry, no more"
    [row] = read_rows(tmp_path / "run" / "results.jsonl")
    assert row.system_error and not row.passed
    assert row.error is not None and f"its postgres container {provider.victims[1]} (" in row.error
    assert row.cause == "container"
    assert (row.model_extra or {})["retries"] == 1
    lines = _errors(tmp_path / "run")
    assert [(e["try"], e["retried"]) for e in lines] == [(1, True), (2, False)]
    assert dict(coordinator.error_causes) == {"container": 1}
    assert coordinator.counts["errors"] == 1 and coordinator.counts["retried"] == 1
