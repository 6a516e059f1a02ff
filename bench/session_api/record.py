"""`tbx session-proxy --record OUT`: every destroyed session written as a tbx
attempt, through the writers `tbx run` and `tbx env serve` use
(bench.run.recording), so `tbx report` and `tbx view` read the directory.

A session that plays a benchmark task (what the reference clients send: the
task's effective init as its server_config entry and the scenario's tools) is
recorded under that task's id; one whose entry or tools differ in anything that
defines the task (server_config.task_key: starting rows, sources, golden calls,
rubrics, yes/no rubrics, extra keys, the tool set) under `session:<id>`, so an
edited task never passes for the benchmark's. The verdict is the hash comparison
against the session's golden end state; yes/no rubrics are the external harness's
to ask, so they are not judged here (`rubrics_skipped`). The trajectory holds the
calls made through the API; there are no messages (the harness keeps the conversation).
"""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

from bench.dataset import Benchmark, Task
from bench.rollout.trajectory import ToolCall, Trajectory
from bench.run.causes import fault_of
from bench.run.grading import judged
from bench.run.output import RunOutput, dataset_hash, write_manifest
from bench.run.recording import write_graded, write_system_error
from bench.run.revive import SEED_SUFFIX, SessionSeed, write_session_seed
from bench.session_api.server_config import parse_entry, task_key
from bench.session_api.sessions import AGENT_NAME, Session
from judge import AttemptRecord
from sandbox import image_digests

log = logging.getLogger(__name__)


class Recorder:
    def __init__(self, out: Path, bench: Benchmark, run_id: str):
        self.output = RunOutput(out)
        self.bench = bench
        self.run_id = run_id
        self._index: dict[str, dict[str, Task]] = {}  # server -> content key -> task
        self._repeats: dict[str, int] = {}
        self._manifest = False

    def open(self) -> None:
        self.output.lock()
        self.output.repair()

    def close(self) -> None:
        self.output.unlock()

    def _tasks_of(self, server: str) -> dict[str, Task]:
        if server not in self._index:
            index: dict[str, Task] = {}
            for task in self.bench.tasks:
                if task.server == server or task.scenario == server:
                    # the task's own entry through the parser a session's goes through
                    entry = parse_entry(self.bench, server, self.bench.effective_init(task).raw)
                    key = task_key(entry, self.bench.scenario_of(task).tool_names)
                    index.setdefault(key, task)
            self._index[server] = index
        return self._index[server]

    def task_of(self, session: Session) -> Task:
        """The benchmark task the session played, else a task named `session:<id>`."""
        entry = session.entry
        assert entry is not None
        task = self._tasks_of(entry.server).get(task_key(entry, session.available))
        if task is not None:
            return task
        return Task(
            id=session.task_id,
            file="",
            uid=session.id,
            source="",
            scenario=entry.server,
            domain=entry.domain,
            server=entry.server,
            query="",
        )

    def _repeat(self, task: Task) -> int:
        if task.id not in self._repeats:
            done = self.output.done(retry_errors=False)
            self._repeats[task.id] = max((r + 1 for t, r in done if t == task.id), default=0)
        repeat = self._repeats[task.id]
        self._repeats[task.id] = repeat + 1
        return repeat

    async def record(self, session: Session, images: dict[str, str]) -> None:
        await asyncio.to_thread(self._record, session, images)

    def _record(self, session: Session, images: dict[str, str]) -> None:
        outcome, entry, golden = session.outcome, session.entry, session.golden
        if outcome is None or entry is None:
            return
        if not self._manifest:
            write_manifest(
                self.output.out,
                self.bench,
                agent=AGENT_NAME,
                repeats=1,
                run_name=AGENT_NAME,
                images=images,
                digests=image_digests(images),
                config=None,
                run_id=self.run_id,
                data_hash=dataset_hash(self.bench.root),
            )
            self._manifest = True
        task = self.task_of(session)
        if task.id == session.task_id:  # no benchmark task: its preparation, for `tbx up --from`
            write_session_seed(
                self.output.out / "states" / f"{outcome.attempt_id}{SEED_SUFFIX}",
                SessionSeed(
                    server=entry.server,
                    domain=entry.domain,
                    rows=entry.rows,
                    sources=entry.sources,
                    available_tools=list(session.available),
                ),
            )
        repeat = self._repeat(task)
        record = AttemptRecord(
            task_id=task.id,
            attempt_id=outcome.attempt_id,
            run_id=self.run_id,
            repeat=repeat,
            domain=entry.domain,
        )
        traj = Trajectory(
            task_id=task.id,
            agent=AGENT_NAME,
            finish_reason="done",
            tool_calls=[
                ToolCall(
                    index=i,
                    tool=c.tool,
                    arguments=c.arguments,
                    result=c.result,
                    is_error=c.is_error,
                    latency_ms=c.latency_ms or 0.0,
                )
                for i, c in enumerate(outcome.calls)
            ],
            tools_offered=list(session.tools),
            metadata={"session_id": session.id},
        )
        outcome = outcome.model_copy(update={"trajectory": traj, "repeat": repeat, "task_id": task.id})
        if (
            session.error is not None
            or golden is None
            or (outcome.terminal_state is None and outcome.resource_limit is None)
        ):
            cause = session.error or RuntimeError("the session ended without a terminal state")
            message = f"{cause.__class__.__name__}: {cause}"
            write_system_error(
                self.output, task, record, traj, message, "", outcome.timings, fault=fault_of(cause)
            )
            return
        # The one grading path; a limit the client's own calls drove its sandbox over is
        # a failure (resource_limit), not a system error.
        graded = judged(
            self.bench,
            task,
            golden,
            outcome.terminal_state,
            outcome.prefix + outcome.calls,  # every call that made the state (a prefix's too)
            initial=outcome.initial_state,
            domain=entry.domain,
            rubrics_skipped=bool(entry.rubrics_yesno),
            resource_limit=outcome.resource_limit,
        )
        write_graded(self.output, task, record, outcome, graded, outcome.timings)
