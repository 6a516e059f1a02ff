"""The attempt unit end to end without Docker: an `AttemptSpec` (round-tripped
through JSON, as if shipped to another machine) executed against a fake
sandbox provider whose "sandbox" is the domain's real MCP server started
in-process on 127.0.0.1 over a fresh database on the host test PostgreSQL,
behind the real tool proxy. The oracle agent's terminal state must equal
the golden end state (replayed in-process), and the coordinator must grade
and write it like any run."""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import psycopg
import pytest
from attempt_fakes import PACK, TASK, FakeProvider, golden_in_process

from bench.dataset import Benchmark, Task, load_benchmark
from bench.llm.config import parse_models_config
from bench.run.attempt import AttemptFailure, AttemptOutcome, AttemptSpec, attempt_spec
from bench.run.causes import fault_of
from bench.run.coordinator import Coordinator, RunOptions
from bench.run.daemon import DaemonGone
from bench.run.executor import LocalExecutor
from bench.run.golden import GoldenReplayError, GoldenStore
from bench.run.grading import grade
from bench.run.lifecycle import execute_attempt
from bench.run.results import read_rows
from bench.run.retries import RetryPolicy, TriesSpent
from judge import state_hash
from sandbox import ContainerStartError, ProxyServer, SandboxGoneError, SandboxRequest


def test_spec_is_data_and_carries_key_names_never_key_values(pack: Benchmark) -> None:
    models = parse_models_config(
        {
            "agent": {"base_url": "http://127.0.0.1:9/v1", "model": "a", "api_key": "sk-literal-secret"},
            "user": {"base_url": "http://127.0.0.1:9/v1", "model": "u", "api_key_env": "USER_KEY"},
            "judge": {"base_url": "http://127.0.0.1:9/v1", "model": "j"},
        }
    )
    spec = attempt_spec(
        pack, pack.task(TASK), 3, run_id="run-1", attempt_id="att-1", agent="llm", models=models
    )
    text = spec.model_dump_json()
    assert "sk-literal-secret" not in text
    back = AttemptSpec.model_validate_json(text)
    assert back.models is not None and back.models.user is not None
    assert back.models.user.api_key_env == "USER_KEY" and back.models.agent is not None
    assert back.models.agent.api_key is None
    # Rubrics and golden states are graded where the golden lives: no judge role travels.
    assert back.models.judge is None and spec.models is not None and spec.models.judge is None
    # JSON form: seed timestamps travel as ISO text (the next test seeds from that form).
    assert back.model_dump(mode="json", exclude={"models"}) == spec.model_dump(
        mode="json", exclude={"models"}
    )
    assert (
        back.repeat == 3
        and back.domain == "retail"
        and back.seed["external_retail_toolset_oms_models_orders"]
    )


def test_oracle_attempt_against_a_fake_provider_ends_in_the_golden_state(
    pack: Benchmark, provider: FakeProvider, proxy: ProxyServer, make_database: Any
) -> None:
    task = pack.task(TASK)
    golden = golden_in_process(make_database, pack, task)
    spec = attempt_spec(
        pack,
        task,
        0,
        run_id="run-unit",
        attempt_id="att-unit-0",
        agent="oracle",
    )
    shipped = AttemptSpec.model_validate_json(spec.model_dump_json())
    assert golden.golden_hash not in spec.model_dump_json()

    # No `bench`: the executing side runs from what the spec carries.
    outcome = asyncio.run(execute_attempt(shipped, provider, proxy))

    assert outcome.system_error is None
    assert outcome.terminal_state == golden.final_state
    assert outcome.initial_state is not None and state_hash(outcome.initial_state) == golden.initial_hash
    assert [c.tool for c in outcome.calls] == [c.tool for c in golden.calls]
    assert [c.result for c in outcome.calls] == [c.result for c in golden.calls]
    assert (
        outcome.finish_reason == "done" and json.loads(outcome.model_dump_json())["finish_reason"] == "done"
    )
    assert {"sandbox_start", "initial_dump", "agent", "final_dump", "teardown"} <= set(outcome.timings)
    # The request the provider saw is the spec's data; the sandbox is closed afterwards.
    assert (
        provider.requests[0].attempt_id == "att-unit-0"
        and provider.requests[0].prepare.rows["retail"] == spec.seed
    )
    assert provider.sessions[0].closed and provider.alive == 0
    # The outcome is data too (it may come back from another machine).
    assert AttemptOutcome.model_validate_json(outcome.model_dump_json()) == outcome

    graded = asyncio.run(
        grade(
            pack,
            task,
            golden,
            outcome.terminal_state,
            outcome.calls,
            initial=outcome.initial_state,
            final_message=outcome.final_message,
        )
    )
    assert graded.verdict.passed and graded.verdict.strict


def test_a_provider_failure_comes_back_as_a_system_error_not_an_exception(
    pack: Benchmark, pg_dsn: str, proxy: ProxyServer
) -> None:
    broken = FakeProvider(pg_dsn, fail_boots=10**6)
    spec = attempt_spec(pack, pack.task(TASK), 1, run_id="run-unit", attempt_id="att-broken", agent="oracle")
    outcome = asyncio.run(execute_attempt(spec, broken, proxy))
    assert outcome.system_error is not None
    assert outcome.system_error.kind == "ContainerStartError"
    assert str(outcome.system_error).startswith("ContainerStartError: server-retail container exited")
    assert outcome.terminal_state is None and outcome.calls == [] and broken.alive == 0


def test_a_shipped_spec_runs_where_the_dataset_is_not(
    pg_dsn: str, proxy: ProxyServer, tmp_path: Path
) -> None:
    """A Ray node has no dataset: the spec, made from a copy that is gone before it
    runs, names no path and still runs the attempt to its end."""
    copy = tmp_path / "dataset"
    shutil.copytree(PACK, copy)
    bench = load_benchmark(copy)
    spec = attempt_spec(bench, bench.task(TASK), 0, run_id="run-unit", attempt_id="att-away", agent="oracle")
    text = spec.model_dump_json()
    shutil.rmtree(copy)
    assert str(copy) not in text and "dataset" not in json.loads(text)
    provider = FakeProvider(pg_dsn)
    try:
        outcome = asyncio.run(execute_attempt(AttemptSpec.model_validate_json(text), provider, proxy))
    finally:
        provider.dbs.close()
    assert outcome.system_error is None and outcome.finish_reason == "done"
    assert [c.tool for c in outcome.calls] == [tool for tool, _ in bench.golden_calls(bench.task(TASK))]


def test_a_brief_for_another_agent_or_task_is_refused(pack: Benchmark) -> None:
    spec = attempt_spec(pack, pack.task(TASK), 0, run_id="r", attempt_id="a", agent="oracle")
    with pytest.raises(ValueError, match="the brief is"):
        AttemptSpec.model_validate({**spec.model_dump(), "agent": "noop"})


def test_the_coordinator_runs_grades_and_resumes_against_a_fake_provider(
    pack: Benchmark, provider: FakeProvider, make_database: Any, tmp_path: Path
) -> None:
    task = pack.task(TASK)
    store = GoldenStore(pack, tmp_path / "golden", image_id="in-process", allow_replay=False)
    store.save(golden_in_process(make_database, pack, task, key=store.key(task)))
    out = tmp_path / "run"
    opts = RunOptions(out=out, agent="oracle", repeat=2, concurrency=2)
    seen: list[str] = []
    coordinator = Coordinator(
        pack,
        opts,
        provider=provider,
        golden=store,
        progress=lambda state, t, r, summary: seen.append(summary),
    )
    counts = asyncio.run(coordinator.run([task]))

    assert counts == {"done": 2, "passed": 2, "failed": 0, "errors": 0, "retried": 0, "alive": 0}
    rows = read_rows(out / "results.jsonl")
    assert sorted(r.repeat for r in rows) == [0, 1] and all(r.passed and r.signature is None for r in rows)
    assert len(seen) == 2 and seen == ["pass", "pass"]
    for r in rows:
        extra = r.model_extra or {}
        record = json.loads((out / extra["attempt_file"]).read_text())
        assert record["verdict"]["strict"] is True and record["terminal_state_path"].startswith("../states/")
        assert (out / extra["trajectory"]).is_file()
        assert list(r.timings) == [
            "golden",
            "sandbox_start",
            "initial_dump",
            "agent",
            "final_dump",
            "teardown",
            "judge",
        ]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["image_digests"] == {"servers": "in-process"} and len(manifest["bundle_hash"]) == 64
    assert {req.attempt_id for req in provider.requests} == {r.model_extra["attempt_id"] for r in rows}  # type: ignore[index]

    # Resume: nothing left to run.
    again = Coordinator(pack, opts, provider=provider, golden=store)
    assert asyncio.run(again.run([task]))["done"] == 0
    assert len(read_rows(out / "results.jsonl")) == 2


def test_stop_lets_the_running_attempt_finish_and_starts_no_other(
    pack: Benchmark, provider: FakeProvider, make_database: Any, tmp_path: Path
) -> None:
    task = pack.task(TASK)
    store = GoldenStore(pack, tmp_path / "golden", image_id="in-process", allow_replay=False)
    store.save(golden_in_process(make_database, pack, task, key=store.key(task)))
    opts = RunOptions(out=tmp_path / "run", agent="oracle", repeat=3, concurrency=1)

    def stop_after_first(state: Any, t: Task, repeat: int, summary: str) -> None:
        state.stop()

    coordinator = Coordinator(pack, opts, provider=provider, golden=store, progress=stop_after_first)
    counts = asyncio.run(coordinator.run([task]))
    assert counts["done"] == 1 and counts["passed"] == 1
    assert len(read_rows(tmp_path / "run" / "results.jsonl")) == 1 and len(provider.sessions) == 1


def _run_with_flaky_boots(
    pack: Benchmark,
    pg_dsn: str,
    make_database: Any,
    tmp_path: Path,
    *,
    fail_boots: int,
    max_retries: int = 2,
    max_setup_retries: int = 5,
    executor: Any = None,
) -> tuple[dict[str, int], list[Any], list[dict[str, Any]]]:
    task = pack.task(TASK)
    store = GoldenStore(pack, tmp_path / "golden", image_id="in-process", allow_replay=False)
    store.save(golden_in_process(make_database, pack, task, key=store.key(task)))
    flaky = FakeProvider(pg_dsn, fail_boots=fail_boots)
    opts = RunOptions(
        out=tmp_path / "run",
        agent="oracle",
        repeat=1,
        concurrency=1,
        retries=RetryPolicy(max_retries=max_retries, max_setup_retries=max_setup_retries, wait_first=0.01),
    )
    try:
        run = Coordinator(pack, opts, provider=flaky, executor=executor and executor(flaky), golden=store)
        counts = asyncio.run(run.run([task]))
    finally:
        flaky.dbs.close()
    errors_file = tmp_path / "run" / "errors.jsonl"
    errors = (
        [json.loads(line) for line in errors_file.read_text().splitlines()] if errors_file.exists() else []
    )
    return counts, read_rows(tmp_path / "run" / "results.jsonl"), errors


def test_a_system_error_is_retried_in_a_fresh_sandbox_and_the_retry_is_recorded(
    pack: Benchmark, pg_dsn: str, make_database: Any, tmp_path: Path
) -> None:
    counts, rows, errors = _run_with_flaky_boots(
        pack, pg_dsn, make_database, tmp_path, fail_boots=2, max_retries=2
    )
    assert counts["passed"] == 1 and counts["errors"] == 0 and counts["retried"] == 2
    # One row for the (task, repeat): the graded third try, which names the two before it.
    assert len(rows) == 1 and rows[0].passed and not rows[0].system_error
    extra = rows[0].model_extra or {}
    assert extra["retries"] == 2 and all(
        "server-retail container exited" in e for e in extra["retried_errors"]
    )
    assert [(e["try"], e["retried"]) for e in errors] == [(1, True), (2, True)]
    assert len({e["attempt_id"] for e in errors} | {extra["attempt_id"]}) == 3  # a fresh attempt id per try


def test_retries_are_bounded_and_the_last_try_is_the_system_error_row(
    pack: Benchmark, pg_dsn: str, make_database: Any, tmp_path: Path
) -> None:
    counts, rows, errors = _run_with_flaky_boots(
        pack, pg_dsn, make_database, tmp_path, fail_boots=10, max_setup_retries=1
    )
    assert counts["errors"] == 1 and counts["retried"] == 1 and counts["passed"] == 0
    assert len(rows) == 1 and rows[0].system_error and not rows[0].passed
    assert (rows[0].model_extra or {})["retries"] == 1
    assert [(e["try"], e["retried"]) for e in errors] == [(1, True), (2, False)]


def test_no_retries_when_the_policy_says_none(
    pack: Benchmark, pg_dsn: str, make_database: Any, tmp_path: Path
) -> None:
    counts, rows, errors = _run_with_flaky_boots(
        pack, pg_dsn, make_database, tmp_path, fail_boots=1, max_retries=0, max_setup_retries=0
    )
    assert counts["errors"] == 1 and counts["retried"] == 0
    assert len(rows) == 1 and rows[0].system_error and [e["retried"] for e in errors] == [False]


class KilledMidAttempt(LocalExecutor):
    """The first `kills` tries lose their sandbox while the agent has its turns (as a
    container killed then is reported: bench.run.lifecycle); the others run for real."""

    def __init__(self, provider: FakeProvider, kills: int):
        super().__init__(provider)
        self.kills = kills

    async def execute(self, spec: AttemptSpec) -> AttemptOutcome:
        if self.kills == 0:
            return await super().execute(spec)
        self.kills -= 1
        lost = SandboxGoneError(f"attempt {spec.attempt_id}: server-retail container killed (exit 137)")
        return AttemptOutcome.of(spec, system_error=AttemptFailure.of(lost), phase="agent")


def test_tries_lost_before_the_agent_cost_none_of_the_retries(
    pack: Benchmark, pg_dsn: str, make_database: Any, tmp_path: Path
) -> None:
    # The issue's case: a try killed while the agent ran, then its retries' sandboxes
    # killed while booting. Only the first is charged to --max-retries 1.
    counts, rows, errors = _run_with_flaky_boots(
        pack,
        pg_dsn,
        make_database,
        tmp_path,
        fail_boots=3,
        max_retries=1,
        executor=lambda provider: KilledMidAttempt(provider, kills=1),
    )
    assert counts["passed"] == 1 and counts["errors"] == 0 and counts["retried"] == 4
    assert [(e["phase"], e["retried"]) for e in errors] == [("agent", True)] + [("checkout", True)] * 3
    assert len(rows) == 1 and rows[0].passed and (rows[0].model_extra or {})["retries"] == 4


def test_tries_that_reached_the_agent_use_up_the_retries(
    pack: Benchmark, pg_dsn: str, make_database: Any, tmp_path: Path
) -> None:
    counts, rows, errors = _run_with_flaky_boots(
        pack,
        pg_dsn,
        make_database,
        tmp_path,
        fail_boots=1,
        max_retries=1,
        executor=lambda provider: KilledMidAttempt(provider, kills=2),
    )
    assert counts["errors"] == 1 and counts["retried"] == 1
    assert [(e["phase"], e["retried"]) for e in errors] == [("agent", True), ("agent", False)]
    assert len(rows) == 1 and rows[0].system_error


def test_a_boot_that_always_fails_still_ends(
    pack: Benchmark, pg_dsn: str, make_database: Any, tmp_path: Path
) -> None:
    counts, rows, errors = _run_with_flaky_boots(
        pack, pg_dsn, make_database, tmp_path, fail_boots=100, max_retries=5, max_setup_retries=2
    )
    assert counts["errors"] == 1 and counts["retried"] == 2
    assert [(e["phase"], e["retried"]) for e in errors] == [("checkout", True)] * 2 + [("checkout", False)]
    assert len(rows) == 1 and rows[0].system_error


def test_errors_a_new_try_cannot_change_are_not_retried() -> None:
    policy = RetryPolicy(max_retries=3)
    assert not fault_of(GoldenReplayError("golden replay of t failed: call 0 ...")).retryable
    assert fault_of(ContainerStartError("server-retail container exited during start")).retryable
    assert [policy.wait(n) for n in (1, 2, 3)] == [1.0, 2.0, 4.0] and policy.wait(10) == 30.0
    assert policy.again(TriesSpent(charged=3, uncharged=5)) and not policy.again(TriesSpent(charged=4))
    assert not policy.again(TriesSpent(uncharged=6))


class DaemonAway(FakeProvider):
    """A provider whose daemon is away until `back()`: boots and pings fail as a
    stopped Docker daemon's socket does."""

    def __init__(self, pg_dsn: str, back_after: float | None, down: bool = True):
        super().__init__(pg_dsn)
        self.down = down
        self.back_after = back_after  # seconds after the first ping; None: never
        self.first_ping: float | None = None
        self.recoveries = 0

    def _check(self) -> None:
        if self.down and self.first_ping is not None and self.back_after is not None:
            self.down = time.monotonic() - self.first_ping < self.back_after
        if self.down:
            raise ConnectionRefusedError("[Errno 111] Connection refused: /var/run/docker.sock")

    async def ping(self) -> None:
        if self.first_ping is None:
            self.first_ping = time.monotonic()
        self._check()

    async def recovered(self) -> None:
        self.recoveries += 1

    async def boot(self, request: SandboxRequest) -> psycopg.Connection[Any]:
        self._check()
        return await super().boot(request)


def _run_with_daemon_away(
    pack: Benchmark,
    pg_dsn: str,
    make_database: Any,
    tmp_path: Path,
    back_after: float | None,
    down: bool = True,
) -> tuple[DaemonAway, Any, list[dict[str, Any]]]:
    task = pack.task(TASK)
    store = GoldenStore(pack, tmp_path / "golden", image_id="in-process", allow_replay=False)
    store.save(golden_in_process(make_database, pack, task, key=store.key(task)))
    away = DaemonAway(pg_dsn, back_after, down)
    opts = RunOptions(
        out=tmp_path / "run",
        agent="oracle",
        repeat=2,
        concurrency=2,
        # No retries at all: tries the outage failed do not count against them.
        retries=RetryPolicy(max_retries=0, wait_first=0.01),
        daemon_wait=1.0,
    )
    outcome: Any
    try:
        outcome = asyncio.run(Coordinator(pack, opts, provider=away, golden=store).run([task]))
    except DaemonGone as exc:
        outcome = exc
    finally:
        away.dbs.close()
    errors_file = tmp_path / "run" / "errors.jsonl"
    errors = (
        [json.loads(line) for line in errors_file.read_text().splitlines()] if errors_file.exists() else []
    )
    return away, outcome, errors


def test_tries_wait_for_the_daemon_and_the_outage_costs_no_retry(
    pack: Benchmark, pg_dsn: str, make_database: Any, tmp_path: Path
) -> None:
    away, counts, errors = _run_with_daemon_away(pack, pg_dsn, make_database, tmp_path, back_after=0.3)
    assert counts["passed"] == 2 and counts["errors"] == 0, counts
    rows = read_rows(tmp_path / "run" / "results.jsonl")
    assert sorted(r.repeat for r in rows) == [0, 1] and all(r.passed for r in rows)
    # Each repeat failed once while the daemon was away (a retried line), then waited:
    # one shared wait, one clean-up once it answered, no burst of failed tries.
    assert len(errors) == 2 and all(e["retried"] and "Connection refused" in e["error"] for e in errors)
    assert away.recoveries == 1


def test_a_daemon_that_stays_away_stops_the_run_without_rows_so_it_resumes(
    pack: Benchmark, pg_dsn: str, make_database: Any, tmp_path: Path
) -> None:
    _, gone, errors = _run_with_daemon_away(pack, pg_dsn, make_database, tmp_path, back_after=None)
    assert isinstance(gone, DaemonGone) and "re-run the same command" in str(gone)
    assert gone.waited >= 1.0
    assert not (tmp_path / "run" / "results.jsonl").exists() or not read_rows(
        tmp_path / "run" / "results.jsonl"
    )
    assert errors and all(e["retried"] for e in errors)
    # The same command, the daemon back: both repeats run now.
    _, counts, _ = _run_with_daemon_away(pack, pg_dsn, make_database, tmp_path, back_after=None, down=False)
    assert counts["passed"] == 2, counts
    assert sorted(r.repeat for r in read_rows(tmp_path / "run" / "results.jsonl")) == [0, 1]


class AwayAtTheEnd(DaemonAway):
    """The daemon answers for every attempt and goes away as the run ends: the first
    end-of-run sweep fails as a restarting daemon's missing socket does."""

    def __init__(self, pg_dsn: str, back_after: float | None, answers_at_end: bool = False):
        super().__init__(pg_dsn, back_after, down=False)
        self.answers_at_end = answers_at_end
        self.sweeps = 0

    async def sweep(self, run_id: str | None = None) -> None:
        self.sweeps += 1
        if self.sweeps == 1:
            self.down = not self.answers_at_end
            raise ConnectionError(
                "('Connection aborted.', FileNotFoundError(2, 'No such file or directory'))"
            )


def _run_away_at_the_end(
    pack: Benchmark, pg_dsn: str, make_database: Any, tmp_path: Path, provider: AwayAtTheEnd
) -> Any:
    task = pack.task(TASK)
    store = GoldenStore(pack, tmp_path / "golden", image_id="in-process", allow_replay=False)
    store.save(golden_in_process(make_database, pack, task, key=store.key(task)))
    opts = RunOptions(out=tmp_path / "run", agent="oracle", repeat=2, concurrency=2, daemon_wait=1.0)
    try:
        return asyncio.run(Coordinator(pack, opts, provider=provider, golden=store).run([task]))
    except Exception as exc:
        return exc
    finally:
        provider.dbs.close()


def test_a_daemon_restarting_as_the_run_ends_is_waited_for_and_the_sweep_repeated(
    pack: Benchmark, pg_dsn: str, make_database: Any, tmp_path: Path
) -> None:
    provider = AwayAtTheEnd(pg_dsn, back_after=0.3)
    counts = _run_away_at_the_end(pack, pg_dsn, make_database, tmp_path, provider)
    assert isinstance(counts, dict) and counts["passed"] == 2, counts
    assert provider.sweeps == 2 and provider.recoveries == 1


def test_a_daemon_gone_as_the_run_ends_leaves_every_row_and_says_so(
    pack: Benchmark, pg_dsn: str, make_database: Any, tmp_path: Path
) -> None:
    provider = AwayAtTheEnd(pg_dsn, back_after=None)
    gone = _run_away_at_the_end(pack, pg_dsn, make_database, tmp_path, provider)
    assert isinstance(gone, DaemonGone), gone
    assert sorted(r.repeat for r in read_rows(tmp_path / "run" / "results.jsonl")) == [0, 1]
    assert provider.sweeps == 1


def test_a_failed_end_of_run_sweep_with_the_daemon_answering_is_tried_once_more(
    pack: Benchmark, pg_dsn: str, make_database: Any, tmp_path: Path
) -> None:
    provider = AwayAtTheEnd(pg_dsn, back_after=None, answers_at_end=True)
    counts = _run_away_at_the_end(pack, pg_dsn, make_database, tmp_path, provider)
    assert isinstance(counts, dict) and counts["passed"] == 2, counts
    assert provider.sweeps == 2 and provider.recoveries == 0


class PlanRecordingProvider(FakeProvider):
    """A fake provider that keeps the coordinator's plan: each upcoming checkout's preparer."""

    def __init__(self, pg_dsn: str):
        super().__init__(pg_dsn)
        self.planned: list[str] = []

    def plan(self, attempts_per_domain: Mapping[str, int], upcoming: Any = None) -> None:
        self.planned = [u.preparer().fingerprint() for u in upcoming or []]


@pytest.mark.parametrize("policy_search", ["hybrid", "keyword"])
def test_the_planned_preparers_equal_the_attempts_own(
    pack: Benchmark, pg_dsn: str, make_database: Any, tmp_path: Path, policy_search: str
) -> None:
    # A pool prepares spares ahead with the planned preparers and hands one over only
    # for an equal fingerprint: the plan must predict each attempt's request exactly.
    provider = PlanRecordingProvider(pg_dsn)
    try:
        task = pack.task(TASK)
        store = GoldenStore(pack, tmp_path / "golden", image_id="in-process", allow_replay=False)
        store.save(golden_in_process(make_database, pack, task, key=store.key(task)))
        opts = RunOptions(
            out=tmp_path / "run", agent="oracle", repeat=2, concurrency=1, policy_search=policy_search
        )
        asyncio.run(Coordinator(pack, opts, provider=provider, golden=store).run([task]))
        checked_out = [r.prepare.fingerprint() for r in provider.requests if r.prepare is not None]
        assert len(provider.planned) == 2 and checked_out == provider.planned
    finally:
        provider.dbs.close()
