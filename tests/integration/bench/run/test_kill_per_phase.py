"""A container kill in each phase of a `tbx run` attempt, and what it costs (issue 38,
"Faults"): harmless where nothing of the attempt had happened yet or everything it
needed was read, exactly one retried try where the attempt itself was lost.

One (task, repeat) of the oracle agent per case, on the real daemon, with the run's
own code paths; each kill is made at a point of the phase itself (a hook on the step,
never a sleep), with `docker kill` (SIGKILL from the daemon) of the set's retail server
(PostgreSQL at the terminal dump, the one container that dump needs):

  golden replay   the replay's server, after its initial dump     harmless (replayed)
  boot            a warm spare's server, while its start waits     harmless (another set)
  pool            the booted spare's server, before its checkout   harmless (another set)
  checkout        the server, once the checkout handed the set     harmless (another set)
  mid-attempt     the server, after the agent's first call         one retry
  grading         PostgreSQL, as the terminal state is dumped      one retry
  teardown        the server, as the set goes to removal           harmless

Every case ends with the row passed, no system error left, the kill recorded where it
cost a try (an errors.jsonl line naming the container, with its phase) and nowhere
else, and nothing of the run left on the daemon.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

import bench.replay.sandboxed as sandboxed
import bench.run.lifecycle as lifecycle
from bench.dataset import Benchmark
from bench.run.coordinator import Coordinator, RunOptions
from bench.run.golden import GoldenStore
from bench.run.results import read_rows
from bench.run.retries import RetryPolicy
from sandbox import DockerProvider, Sandbox, SandboxLease, SandboxRequest, leftovers
from sandbox.proxy.registered import RegisteredAttempt

pytestmark = pytest.mark.docker

TASK = "demo_retail.py:test_ret_expedite_headphones"
SERVER = "server-retail"


@pytest.fixture(scope="module")
def golden(demo_bench: Benchmark, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A golden cache holding the task's state, so only the golden case replays."""
    path = tmp_path_factory.mktemp("golden")
    asyncio.run(GoldenStore(demo_bench, path).get(demo_bench.task(TASK)))
    return path


class Kill:
    """One `docker kill` of the running `role` container of a run, made once."""

    def __init__(self, role: str = SERVER):
        self.role = role
        self.run_id = ""
        self.victims: list[str] = []  # container names
        self._lock = threading.Lock()

    def __call__(self, container_id: str | None = None) -> None:
        with self._lock:
            if self.victims:
                return
            client = docker.from_env()
            try:
                if container_id is not None:
                    victim = client.containers.get(container_id)
                else:
                    labels = [f"tbx.run={self.run_id}", f"tbx.role={self.role}"]
                    [victim] = client.containers.list(filters={"label": labels, "status": "running"})
                victim.kill()
                victim.wait(timeout=30)
                self.victims.append(victim.name)
            finally:
                client.close()


class Provider(DockerProvider):
    """The run's own provider, with hooks on the checkout (`before`: the pool's spare is
    booted, `after`: the set handed over) and on the set's close."""

    def __init__(self, kill: Kill, warm: int, where: str):
        super().__init__(warm=warm)
        self.kill, self.where = kill, where

    async def checkout(self, request: SandboxRequest) -> SandboxLease:
        if self.where == "pool" and not self.kill.victims:
            pool = await self.warm_up(request)
            deadline = time.monotonic() + 180
            while pool.booted < 1:  # the spare, booted and prepared, waits for this checkout
                assert time.monotonic() < deadline, "the warm spare never booted"
                await asyncio.sleep(0.05)
            await asyncio.to_thread(self.kill)
        session = await super().checkout(request)
        if self.where == "checkout" and not self.kill.victims:
            await asyncio.to_thread(self.kill, session.containers[SERVER])
        if self.where == "teardown":
            close = session.close

            async def killed_then_closed() -> None:
                await asyncio.to_thread(self.kill, session.containers[SERVER])
                await close()

            session.close = killed_then_closed  # type: ignore[method-assign]
        return session


def _hook(monkeypatch: pytest.MonkeyPatch, kill: Kill, phase: str) -> None:
    """The hooks of the phases the provider does not see."""
    if phase == "golden":
        replay_calls = sandboxed.replay_calls

        async def killed_replay(*args: Any, **kwargs: Any) -> Any:
            await asyncio.to_thread(kill)  # after the replay's initial dump, before its calls
            return await replay_calls(*args, **kwargs)

        monkeypatch.setattr(sandboxed, "replay_calls", killed_replay)
    elif phase == "boot":
        wait_ready = Sandbox._wait_ready

        def killed_while_starting(self: Sandbox, spec: Any, deadline: float) -> tuple[str, float]:
            if spec.role == SERVER:
                kill(self._containers[SERVER].get_wrapped_container().id)
            return wait_ready(self, spec, deadline)

        monkeypatch.setattr(Sandbox, "_wait_ready", killed_while_starting)
    elif phase == "mid-attempt":
        record_call = RegisteredAttempt.record_call

        def killed_after_the_first(self: RegisteredAttempt, *args: Any, **kwargs: Any) -> None:
            record_call(self, *args, **kwargs)
            kill()  # the proxy's thread: the agent's next call finds the server gone

        monkeypatch.setattr(RegisteredAttempt, "record_call", killed_after_the_first)
    elif phase == "grading":
        dump_dsn = lifecycle.dump_dsn
        run_agent = lifecycle.run_agent
        ended: list[bool] = []

        async def agent(*args: Any, **kwargs: Any) -> Any:
            traj = await run_agent(*args, **kwargs)
            ended.append(True)
            return traj

        def killed_dump(dsn: str, domain: str) -> Any:
            if ended:  # the terminal dump (the initial state was read at prepare)
                kill()
            return dump_dsn(dsn, domain)

        monkeypatch.setattr(lifecycle, "run_agent", agent)
        monkeypatch.setattr(lifecycle, "dump_dsn", killed_dump)


# phase -> (warm spares, the container killed, the phase of the retried try or None: harmless)
CASES: dict[str, tuple[int, str, str | None]] = {
    "golden": (0, SERVER, None),
    "boot": (1, SERVER, None),
    "pool": (1, SERVER, None),
    "checkout": (0, SERVER, None),
    "mid-attempt": (0, SERVER, "agent"),
    "grading": (0, "postgres", "terminal_dump"),
    "teardown": (0, SERVER, None),
}
# Where the run replaced the lost set before anything of the attempt was lost (a warning naming it).
REPLACED = {"golden", "boot", "pool", "checkout"}


@pytest.fixture
def no_leftovers() -> Iterator[Callable[[str], None]]:
    runs: list[str] = []
    yield runs.append
    for run in runs:
        assert leftovers(run) == ([], []), f"run {run} left containers or networks"


@pytest.mark.parametrize("phase", list(CASES))
def test_a_kill_in_each_phase_is_harmless_or_one_retry(
    demo_bench: Benchmark,
    golden: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    no_leftovers: Callable[[str], None],
    phase: str,
    caplog: pytest.LogCaptureFixture,
) -> None:
    warm, role, retried_phase = CASES[phase]
    kill = Kill(role)
    _hook(monkeypatch, kill, phase)
    out = tmp_path / "run"
    opts = RunOptions(
        out=out,
        repeat=1,
        concurrency=1,
        warm=warm,
        skip_rubrics=True,
        golden_cache=tmp_path / "golden" if phase == "golden" else golden,
        retries=RetryPolicy(max_retries=2, wait_first=0.1),
    )
    notices: list[str] = []
    coordinator = Coordinator(demo_bench, opts, provider=Provider(kill, warm, phase), notice=notices.append)
    kill.run_id = coordinator.run_id
    no_leftovers(coordinator.run_id)
    with caplog.at_level(logging.WARNING):
        asyncio.run(coordinator.run([demo_bench.task(TASK)]))

    [victim] = kill.victims  # the kill was made, once
    [row] = read_rows(out / "results.jsonl")
    assert row.passed and not row.system_error, row.error
    errors_file = out / "errors.jsonl"
    errors = [json.loads(x) for x in errors_file.read_text().splitlines()] if errors_file.exists() else []
    if retried_phase is None:
        assert errors == [], f"a kill in {phase} cost a try: {errors}"
        assert (row.model_extra or {})["retries"] == 0
        assert coordinator.counts["retried"] == 0
    else:
        [line] = errors
        assert line["retried"] is True and line["try"] == 1, line
        assert line["phase"] == retried_phase, line
        assert f"container {victim} (" in line["error"], line["error"]
        assert (row.model_extra or {})["retries"] == 1
        assert coordinator.counts["retried"] == 1
    assert not coordinator.error_causes and not notices, notices
    if phase in REPLACED:  # said where it happened, naming the container
        said = [r.getMessage() for r in caplog.records if victim in r.getMessage()]
        assert any("lost" in m and "another" in m for m in said), said
    if phase == "golden":
        assert coordinator.golden.replays == 2, "the lost replay was replayed, in a set of its own"
