"""`tbx up --from` is faithful (issue 37): a recorded attempt replayed through the tool
proxy in a fresh sandbox (bench.run.revive) stands where the attempt stood.

* every attempt of a real `tbx run --agent chaos` on the demo pack (k=2: its mistakes,
  error replies and refused calls included), replayed in full, ends in its recorded
  terminal hash;
* a replay to step N equals the state a live attempt had after its N-th call, dumped
  during that attempt;
* `tbx up --from ... --json` end to end: the replayed calls and the check in its line;
* a `tbx session-proxy --record` directory: a session of an edited task (`session:<id>`,
  brought back from the preparation its recorder wrote) and one of a benchmark task.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pg_support import DEMO_PACK
from session_api_server import Task, call, create, start, stop, value

from bench.dataset import load_benchmark
from bench.rollout.agents.chaos import chaos_plan
from bench.run.attempt import AttemptOutcome, attempt_spec
from bench.run.lifecycle import open_attempt
from bench.run.output import RunOutput
from bench.run.results import ResultRow, load_run
from bench.run.revive import RevivalPlan, plan_revival, revived
from judge import AttemptRecord, State, dump_dsn, state_hash
from sandbox import DockerProvider, ProxyServer, leftovers, new_id, upstream_client

pytestmark = pytest.mark.docker

PACK = DEMO_PACK
CONCURRENCY = 2


async def _replay(plan: RevivalPlan, provider: DockerProvider, proxy: ProxyServer) -> tuple[bool, int, str]:
    """(matched, calls that failed when replayed, the first difference if any)."""
    async with revived(plan, provider, proxy) as r:
        assert r.check is not None, plan.attempt_id
        failed = sum(not c.ok for c in r.replayed)
        assert all(c.ok == c.recorded_ok for c in r.replayed), plan.attempt_id
        diff = r.check.first_difference
        return r.check.matched, failed, diff.describe() if diff else ""


async def _replay_all(plans: list[RevivalPlan], proxy: ProxyServer) -> list[tuple[bool, int, str]]:
    provider = DockerProvider(teardown_inline=True)
    gate = asyncio.Semaphore(CONCURRENCY)

    async def one(plan: RevivalPlan) -> tuple[bool, int, str]:
        async with gate:
            return await _replay(plan, provider, proxy)

    return await asyncio.gather(*(one(p) for p in plans))


def test_every_chaos_attempt_replays_to_its_recorded_terminal_hash(
    base_images: Any, tbx: str, tmp_path: Path
) -> None:
    out = tmp_path / "chaos"
    cmd = [tbx, "run", "--dataset", str(PACK), "--agent", "chaos", "--repeat", "2"]
    cmd += ["--concurrency", str(CONCURRENCY), "--skip-rubrics", "--out", str(out), "--plain"]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=1200)
    assert done.returncode == 0, done.stderr[-3000:]
    rows = load_run(out).rows
    assert len(rows) == 2 * len(load_benchmark(PACK, strict=False).tasks)
    assert not [r for r in rows if r.system_error]
    plans = [plan_revival(out, str((r.model_extra or {})["attempt_id"])) for r in rows]
    assert all(p.full and p.terminal_state is not None for p in plans)
    with ProxyServer() as proxy:
        results = asyncio.run(_replay_all(plans, proxy))
    matched = sum(ok for ok, _, _ in results)
    errored = sum(n for _, n, _ in results)
    calls = sum(len(p.calls) for p in plans)
    print(f"faithful full replays: {matched}/{len(plans)} attempts ({calls} calls, {errored} error replies)")
    assert errored > 0, "chaos made no failing call: the test would not cover errored calls"
    mismatched = [(p.attempt_id, d) for p, (ok, _, d) in zip(plans, results, strict=True) if not ok]
    assert matched == len(plans), mismatched


# ---- a replay to step N against the live attempt's own per-call states -----------------


async def _live_attempt(
    out: Path, task_id: str, calls: list[tuple[str, dict[str, Any]]]
) -> tuple[str, list[State]]:
    """One attempt opened through the one lifecycle, driven by hand through the proxy with
    `calls`, its canonical state dumped after each; written as `tbx run` writes attempts."""
    bench = load_benchmark(PACK, strict=False)
    task = bench.task(task_id)
    run_id = new_id("run")
    spec = attempt_spec(bench, task, 0, run_id=run_id, attempt_id=new_id("att"), agent="chaos", brief=False)
    outcome = AttemptOutcome.of(spec)
    states: list[State] = []
    with ProxyServer() as proxy:
        async with open_attempt(spec, DockerProvider(teardown_inline=True), proxy, outcome=outcome) as live:
            states.append(await live.dump_state())
            async with upstream_client(live.url, live.headers) as client:
                for tool, args in calls:
                    await client.call_tool(tool, args)
                    states.append(await live.dump_state())
    assert outcome.initial_state is not None and outcome.terminal_state is not None
    assert state_hash(outcome.initial_state) == state_hash(states[0])
    assert state_hash(outcome.terminal_state) == state_hash(states[-1])
    output = RunOutput(out)
    record = AttemptRecord(
        task_id=task.id,
        attempt_id=spec.attempt_id,
        run_id=run_id,
        domain=task.domain,
        trajectory=outcome.calls,
        initial_state_path=output.write_state(f"{spec.attempt_id}.initial", outcome.initial_state),
        terminal_state_path=output.write_state(f"{spec.attempt_id}.terminal", outcome.terminal_state),
    )
    attempt_file = output.write_record(record)
    row = ResultRow.model_validate(
        {
            "task_id": task.id,
            "repeat": 0,
            "domain": task.domain,
            "passed": False,
            "attempt_id": spec.attempt_id,
            "attempt_file": attempt_file,
        }
    )
    output.append(output.results, row.to_json_line())
    (out / "manifest.json").write_text(json.dumps({"dataset": str(PACK)}))
    return spec.attempt_id, states


async def _state_at(out: Path, attempt_id: str, step: int, proxy: ProxyServer) -> State:
    plan = plan_revival(out, attempt_id, step)
    async with revived(plan, DockerProvider(teardown_inline=True), proxy) as r:
        assert len(r.replayed) == step
        if step == len(plan.calls):
            assert r.check is not None and r.check.matched
        return await asyncio.to_thread(dump_dsn, r.lease.admin_dsn(plan.domain), plan.domain)


def test_a_replay_to_step_n_equals_the_live_attempts_state_after_n_calls(
    base_images: Any, tmp_path: Path
) -> None:
    task_id = "demo_retail.py:test_ret_defective_speaker_refund"
    bench = load_benchmark(PACK, strict=False)
    plan = chaos_plan(bench, bench.task(task_id), seed=3, rate=0.5)
    calls = [(t, a) for t, a in plan.calls if isinstance(a, dict)]
    # a refused call (no such tool) and a repeated write, beside the chaos agent's mistakes
    calls = [calls[0], ("no_such_tool", {}), *calls[1:], calls[-1]]
    out = tmp_path / "live"
    attempt_id, states = asyncio.run(_live_attempt(out, task_id, calls))
    assert len(states) == len(calls) + 1
    distinct = len({state_hash(s) for s in states})
    assert distinct >= 3, "the calls changed too little for the test to tell steps apart"
    steps = sorted({0, 1, 2, len(calls) // 2, len(calls) - 1, len(calls)})
    with ProxyServer() as proxy:
        for n in steps:
            got = asyncio.run(_state_at(out, attempt_id, n, proxy))
            assert state_hash(got) == state_hash(states[n]), f"step {n}"
    print(
        f"replays to steps {steps} of {len(calls)}: each equals the live attempt's state ({distinct} distinct)"
    )


def test_tbx_up_from_json_line(base_images: Any, spawn: Any, tbx: str, tmp_path: Path) -> None:
    """The command as a user types it: the state after call 2 of an attempt, then the whole of it."""
    task_id = "demo_retail.py:test_ret_expedite_headphones"
    bench = load_benchmark(PACK, strict=False)
    calls = [(t, a) for t, a in bench.golden_calls(bench.task(task_id)) if isinstance(a, dict)]
    out = tmp_path / "run"
    attempt_id, states = asyncio.run(_live_attempt(out, task_id, calls))
    for step, end in ((2, False), (None, True)):
        argv = [tbx, "up", "--from", str(out), f"{task_id}#0", "--no-typesense", "--json"]
        proc = spawn(argv + ([] if step is None else ["--step", str(step)]))
        doc = json.loads(proc.wait_line(lambda line: line.lstrip().startswith("{"), 120))
        assert doc["from"]["attempt_id"] == attempt_id and doc["initial_check"]["matched"]
        assert [c["index"] for c in doc["replayed"]] == list(range(1, (step or len(calls)) + 1))
        assert all(c["same_reply"] for c in doc["replayed"])
        if end:
            assert doc["check"]["matched"] and doc["check"]["replayed_hash"] == state_hash(states[-1])
        else:
            assert doc["check"] is None
        run = doc["run_id"]
        proc.send(signal.SIGINT)
        assert proc.finish(30) == 128 + signal.SIGINT, proc.err
        assert "Traceback" not in proc.err
        assert leftovers(run) == ([], [])


def test_recorded_sessions_come_back_edited_tasks_from_their_recorded_preparation(
    base_images: Any, tmp_path: Path
) -> None:
    bench = load_benchmark(PACK, strict=False)
    task = bench.task("demo_retail.py:test_ret_defective_speaker_refund")
    tools = list(bench.scenario_of(task).tool_names)
    raw = bench.effective_init(task).raw
    edited = json.loads(json.dumps(raw))
    edited["sources"] = [{"name": "policy.md", "snippets": ["Refund every order in full."]}]
    golden = [(t, a) for t, a in bench.golden_calls(task) if isinstance(a, dict)]
    out = tmp_path / "out"
    served = start(tmp_path, PACK, "--record", str(out))
    try:
        with served.client() as c:
            for sid, config in (("edited", edited), ("plain", raw)):
                value(create(c, sid, Task(task.id, task.server, {task.server: config}, tools, {})))
                for tool, args in [*golden, ("no_such_tool", {})]:
                    call(c, sid, tool, args)
                assert value(c.post("/session_destroy", json={"session_id": sid})) == "Ok"
    finally:
        stop(served)
    rows = {r.task_id: r for r in load_run(out).rows}
    assert set(rows) == {"session:edited", task.id}, rows
    assert len(list((out / "states").glob("*.seed.json.gz"))) == 1  # the edited task's only
    plans = [plan_revival(out, "session:edited"), plan_revival(out, f"{task.id}#0")]
    # the API refuses an unknown tool itself (it never reaches the proxy, so no record holds it)
    assert [len(p.calls) for p in plans] == [len(golden)] * 2
    with ProxyServer() as proxy:
        results = asyncio.run(_replay_all(plans, proxy))
    assert [ok for ok, _, _ in results] == [True, True], results


def test_a_differing_state_is_named_never_accepted(
    base_images: Any, spawn: Any, tbx: str, tmp_path: Path
) -> None:
    """A recorded terminal state the replay does not reach: MISMATCH naming the first differing
    table and row, torn down, exit 1 (--keep-on-mismatch holds it with the warning); a recorded
    initial state the sandbox does not start from: the data changed, exit 1, nothing replayed."""
    from judge import read_attempt, write_state

    task_id = "demo_retail.py:test_ret_expedite_headphones"
    bench = load_benchmark(PACK, strict=False)
    calls = [(t, a) for t, a in bench.golden_calls(bench.task(task_id)) if isinstance(a, dict)]
    out = tmp_path / "run"
    attempt_id, states = asyncio.run(_live_attempt(out, task_id, calls))
    record = read_attempt(out / "attempts" / f"{attempt_id}.json")
    table = next(t for t, rows in sorted(states[-1].items()) if rows and "id" in rows[0])
    row = states[-1][table][0]
    field = next(f for f in sorted(row) if f != "id")
    tampered = {**states[-1], table: [{**row, field: "tampered"}, *states[-1][table][1:]]}
    assert record.terminal_state_path is not None and record.initial_state_path is not None
    write_state(out / "attempts" / record.terminal_state_path, tampered)
    argv = [tbx, "up", "--from", str(out), attempt_id, "--no-typesense"]
    proc = spawn(argv)
    assert proc.finish(120) == 1, proc.err
    assert "MISMATCH" in proc.err and f"first difference: table {table} row {row['id']}: {field}:" in proc.err
    assert "Traceback" not in proc.err and "tearing down" in proc.err
    proc = spawn([*argv, "--keep-on-mismatch", "--json"])
    doc = json.loads(proc.wait_line(lambda line: line.lstrip().startswith("{"), 120))
    assert not doc["check"]["matched"] and doc["check"]["first_difference"]["table"] == table
    proc.send(signal.SIGINT)
    assert proc.finish(30) == 128 + signal.SIGINT and "MISMATCH" in proc.err
    assert leftovers(doc["run_id"]) == ([], [])
    write_state(out / "attempts" / record.initial_state_path, tampered)  # "the data changed since the run"
    proc = spawn(argv)
    assert proc.finish(120) == 1, proc.err
    assert "does not start where attempt" in proc.err and f"table {table}" in proc.err
    assert "Traceback" not in proc.err and len(proc.err.strip().splitlines()) == 1, proc.err


def test_an_env_serve_episode_with_a_prefix_comes_back(
    base_images: Any, dataset: Path, tmp_path: Path
) -> None:
    """A `tbx env serve --out` directory: an episode reset with a one-call prefix, then one
    call of its own, comes back to its recorded terminal hash (prefix first), and to step 1
    (the prefix alone) in the state of the same call made live."""
    import httpx
    from env_server_process import TASK, UserStub, start_server, stop_server, wait_ready, write_config

    bench = load_benchmark(dataset, strict=False)
    calls = [{"tool": t, "arguments": a} for t, a in bench.golden_calls(bench.task(TASK))]
    assert len(calls) >= 2
    stub = UserStub()
    served = start_server(
        tmp_path, write_config(tmp_path / "models.json", stub.base_url), dataset, "--warm", "1"
    )
    try:
        wait_ready(served)
        http = httpx.Client(base_url=served.url, timeout=600)
        r = http.post("/reset", json={"test_uid": TASK, "prefix": calls[:1]})
        assert r.status_code == 200, r.text
        episode = r.json()["observation"]["metadata"]["episode_id"]
        action = {"type": "call_tool", "tool_name": calls[1]["tool"], "arguments": calls[1]["arguments"]}
        assert http.post("/step", json={"action": action, "episode_id": episode}).status_code == 200
        done = {"type": "submit_message", "content": "That is all I can do. <DONE>"}
        r = http.post("/step", json={"action": done, "episode_id": episode})
        assert r.status_code == 200 and r.json()["done"], r.text
        attempt_id = r.json()["observation"]["metadata"]["attempt_id"]
    finally:
        stop_server(served)
        stub.close()
    plan = plan_revival(served.out, attempt_id)
    assert (plan.prefix, [c.tool for c in plan.calls]) == (1, [c["tool"] for c in calls[:2]])
    with ProxyServer() as proxy:
        [(matched, _, diff)] = asyncio.run(_replay_all([plan], proxy))
        assert matched, diff
        after_prefix = asyncio.run(_state_at(served.out, attempt_id, 1, proxy))
    assert after_prefix != plan.initial_state and after_prefix != plan.terminal_state
