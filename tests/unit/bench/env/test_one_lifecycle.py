"""`tbx run`'s attempt (`execute_attempt`) and `tbx env serve`'s episode open and
close their attempt through the one `bench.run.lifecycle.open_attempt`: against
the same fake provider (the domain's real MCP server in-process over a database
on the test PostgreSQL, behind the real tool proxy), each checkout is closed
exactly once, and a fault injected at each phase of the lifecycle comes back
from both entry points as the same typed system error."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from attempt_fakes import TASK, FakeProvider, InProcessSession, golden_in_process

from bench.dataset import Benchmark, Task
from bench.env.episode import Episode
from bench.env.host import EnvHost, EnvOptions
from bench.env.protocol import Observation, SubmitMessageAction
from bench.llm.client import CallUsage, LLMClient, UsageLedger
from bench.llm.config import parse_models_config
from bench.rollout.brief import task_brief
from bench.rollout.conversation import Conversation, LoopSpec
from bench.run.attempt import attempt_spec, usage_of
from bench.run.lifecycle import execute_attempt
from bench.run.results import read_rows
from judge import GoldenState
from sandbox import ProxyServer, SandboxRequest

# Nothing answers there: a state dump against it fails as a lost database would.
DEAD_DSN = "host=127.0.0.1 port=9 dbname=nothing connect_timeout=2"
PHASES = ["checkout", "initial_dump", "register", "terminal_dump"]
# The typed error each phase's fault comes back as, whichever entry point drove it.
EXPECTED = {
    "checkout": "ContainerStartError",
    "initial_dump": "OperationalError",
    "register": "ValidationError",  # a registration without servers is refused
    "terminal_dump": "OperationalError",
}


class FaultySession:
    """An in-process session with one phase broken."""

    def __init__(self, inner: InProcessSession, fault: str | None, provider: CountingProvider):
        self.inner, self.fault, self.provider = inner, fault, provider
        self.dumps = 0

    @property
    def servers(self) -> Mapping[str, str]:
        return {} if self.fault == "register" else self.inner.servers

    @property
    def timings(self) -> Mapping[str, float]:
        return self.inner.timings

    @property
    def server_headers(self) -> Mapping[str, str]:
        return self.inner.server_headers

    interface = None
    containers: Mapping[str, str] = {}
    network = None
    tools: Mapping[str, list[dict[str, Any]]] = {}  # not listed ahead: the registration lists

    async def prepared_states(self, fingerprint: str) -> Mapping[str, Any] | None:
        return None  # nothing read ahead: the lifecycle dumps

    def admin_dsn(self, domain: str) -> str:
        self.dumps += 1
        broken = {"initial_dump": 1, "terminal_dump": 2}.get(self.fault or "")
        return DEAD_DSN if self.dumps == broken else self.inner.admin_dsn(domain)

    async def close(self) -> None:
        self.provider.closes += 1
        await self.inner.close()


class CountingProvider(FakeProvider):
    """The fake provider, counting checkouts and closes, with `fault` injected."""

    def __init__(self, pg_dsn: str, fault: str | None):
        super().__init__(pg_dsn, fail_boots=10**6 if fault == "checkout" else 0)
        self.fault = fault
        self.checkouts = 0
        self.closes = 0

    async def boot(self, request: SandboxRequest) -> Any:
        self.checkouts += 1
        return await super().boot(request)

    async def prepare(self, booted: Any, request: SandboxRequest) -> Any:
        inner = await super().prepare(booted, request)
        assert isinstance(inner, InProcessSession)
        return FaultySession(inner, self.fault, self)


class KnownGolden:
    """The golden store of the episode's host, holding the one golden end state computed in-process."""

    def __init__(self, golden: GoldenState):
        self.golden = golden

    async def get(self, task: Task) -> GoldenState:
        return self.golden


@pytest.fixture(scope="module")
def golden(pack: Benchmark, make_database: Any) -> GoldenState:
    return golden_in_process(make_database, pack, pack.task(TASK))


def run_attempt(pack: Benchmark, provider: CountingProvider, proxy: ProxyServer) -> str | None:
    spec = attempt_spec(pack, pack.task(TASK), 0, run_id="run-one", attempt_id="att-one", agent="oracle")
    outcome = asyncio.run(execute_attempt(spec, provider, proxy))
    return None if outcome.system_error is None else outcome.system_error.kind


def run_episode(
    pack: Benchmark, provider: CountingProvider, proxy: ProxyServer, golden: GoldenState, out: Path
) -> Observation:
    """One episode whose agent says it is done at once; its terminal observation."""
    config = parse_models_config({"user": {"base_url": "http://127.0.0.1:9/v1", "model": "never-asked"}})
    task = pack.task(TASK)
    host = EnvHost(pack, config, [task], EnvOptions(out=out, skip_rubrics=True))
    host.provider = provider  # type: ignore[assignment]  # the fake in place of the DockerProvider
    host.proxy = proxy
    host.golden = KnownGolden(golden)  # type: ignore[assignment]
    host.user_client = LLMClient(config.role("user"), role="user")

    async def drive() -> Observation:
        try:
            episode = Episode(host, task, 0)
            obs = await episode.start()
            if obs.kind == "reset":
                obs = await episode.step(SubmitMessageAction(content="Nothing to do. <DONE>"))
            return obs
        finally:
            assert host.user_client is not None
            await host.user_client.aclose()

    return asyncio.run(drive())


def test_both_entry_points_open_and_close_through_one_lifecycle(
    pack: Benchmark, pg_dsn: str, proxy: ProxyServer, golden: GoldenState, tmp_path: Path
) -> None:
    by_attempt = CountingProvider(pg_dsn, None)
    assert run_attempt(pack, by_attempt, proxy) is None
    by_episode = CountingProvider(pg_dsn, None)
    obs = run_episode(pack, by_episode, proxy, golden, tmp_path / "out")
    # The agent did nothing: graded (not a system error), a fail.
    assert obs.kind == "terminal" and obs.reward_type == "fail" and obs.system_error is None
    for provider in (by_attempt, by_episode):
        assert (provider.checkouts, provider.closes, provider.alive) == (1, 1, 0)
        session = provider.sessions[0]
        assert session.closed
    rows = read_rows(tmp_path / "out" / "results.jsonl")
    assert [r.passed for r in rows] == [False]
    # The lifecycle's timings, as `tbx run` records them, plus the episode's own.
    assert {"sandbox_start", "initial_dump", "agent", "final_dump", "teardown", "judge"} <= set(
        rows[0].timings
    )


@pytest.mark.parametrize("phase", PHASES)
def test_a_fault_in_each_phase_is_the_same_system_error_from_both(
    phase: str, pack: Benchmark, pg_dsn: str, proxy: ProxyServer, golden: GoldenState, tmp_path: Path
) -> None:
    by_attempt = CountingProvider(pg_dsn, phase)
    kind = run_attempt(pack, by_attempt, proxy)
    by_episode = CountingProvider(pg_dsn, phase)
    obs = run_episode(pack, by_episode, proxy, golden, tmp_path / "out")

    assert kind == EXPECTED[phase]
    assert obs.kind == "terminal" and obs.reward_type == "system_error"
    # What the client sees: the cause and the kind, never the message (bench.run.client_errors).
    assert obs.system_error is not None
    seen = re.match(r"system error \([a-z ]+\): (\w+) in attempt ", obs.system_error)
    assert seen is not None and seen.group(1) == EXPECTED[phase], obs.system_error
    for provider in (by_attempt, by_episode):
        assert provider.checkouts == 1 and provider.alive == 0
        # A sandbox that was handed over is closed once; a failed checkout hands none over.
        assert provider.closes == (0 if phase == "checkout" else 1)
    assert proxy.attempts() == []  # no registration outlives its attempt
    errors = (tmp_path / "out" / "errors.jsonl").read_text()
    assert EXPECTED[phase] in errors
    # what ended it, and what was measured before (every errors.jsonl line carries timings)
    assert [r.finish_reason for r in read_rows(tmp_path / "out" / "results.jsonl")] == ["system_error"]
    assert all("timings" in json.loads(line) for line in errors.splitlines())


def test_an_episodes_spend_is_priced_as_tbx_runs_is(pack: Benchmark, tmp_path: Path) -> None:
    """`tbx env serve` prices the simulated user's tokens with the models config's table,
    as `tbx run` does (its rows' `cost_usd` was null)."""
    config = parse_models_config(
        {
            "user": {"base_url": "http://127.0.0.1:9/v1", "model": "u"},
            "prices": {"u": {"input": 1.0, "output": 4.0}},
        }
    )
    task = pack.task(TASK)
    host = EnvHost(pack, config, [task], EnvOptions(out=tmp_path / "out", skip_rubrics=True))
    episode = Episode(host, task, 0)
    ledger = UsageLedger()
    ledger.record(CallUsage(role="user", model="u", input_tokens=1000, output_tokens=100))
    run = Conversation(LoopSpec.of(task_brief(pack, task, "llm"), agent="remote", seed=0), None, None, ledger)  # type: ignore[arg-type]
    episode._run = run
    traj = episode._trajectory()
    assert traj is not None and traj.cost_usd == {"user": (1000 * 1.0 + 100 * 4.0) / 1e6}
    assert usage_of(traj)["user"].cost_usd == traj.cost_usd["user"]
