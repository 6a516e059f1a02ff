"""`tbx up --from` without a sandbox (bench.run.revive): naming an attempt, the plan read
from a run directory (a benchmark task's or a Session API session's preparation), each
bad input's one-line error, the first-difference report, and the commands `tbx view`
shows (bench.view.pages). The replays themselves: tests/integration/bench/run/test_revive_faithful.py."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path
from typing import Any

import pytest
from pg_support import DEMO_PACK

from bench.cli.main import main
from bench.dataset import load_benchmark
from bench.prepare import initial_state
from bench.rollout.trajectory import ToolCall, Trajectory
from bench.run.output import RunOutput
from bench.run.results import ResultRow, RunDir
from bench.run.revive import (
    SEED_SUFFIX,
    AttemptAmbiguous,
    AttemptNotFound,
    DatasetMissing,
    NothingToRevive,
    RunNotReadable,
    SessionSeed,
    StepOutOfRange,
    find_attempt,
    first_difference,
    plan_revival,
    state_check,
    write_session_seed,
)
from bench.view.load import Attempt, Run
from bench.view.pages import call_steps, revive_command
from judge import AttemptRecord, ToolCallView

PACK = DEMO_PACK
TASK = "demo_retail.py:test_ret_defective_speaker_refund"
STATE = {"t": [{"id": "1", "v": 1}]}


def _row(task: str, repeat: int, aid: str | None = None, **extra: Any) -> ResultRow:
    data: dict[str, Any] = {"task_id": task, "repeat": repeat, "domain": "retail", "passed": False, **extra}
    if aid is not None:
        data["attempt_id"] = aid
    return ResultRow.model_validate(data)


def _call(tool: str, n: int = 0, *, error: bool = False) -> ToolCallView:
    return ToolCallView.from_reply(tool, {"n": n}, f"reply {n}", error)


def _write(
    out: Path,
    aid: str,
    *,
    task: str = TASK,
    repeat: int = 0,
    states: bool = True,
    prefix: list[ToolCallView] | None = None,
    calls: list[ToolCallView] | None = None,
    system_error: str | None = None,
) -> None:
    """One attempt written with the run's writers (RunOutput), as `tbx run` writes it."""
    output = RunOutput(out)
    record = AttemptRecord(
        task_id=task, attempt_id=aid, repeat=repeat, domain="retail", system_error=system_error
    )
    record.prefix = prefix or []
    record.trajectory = calls or []
    if states:
        record.initial_state_path = output.write_state(f"{aid}.initial", STATE)
        record.terminal_state_path = output.write_state(f"{aid}.terminal", STATE)
    attempt_file = output.write_record(record)
    extra: dict[str, Any] = {"attempt_file": attempt_file}
    if system_error:
        extra.update(system_error=True, error=system_error)
    output.append(output.results, _row(task, repeat, aid, **extra).to_json_line())


def _manifest(out: Path, dataset: str) -> None:
    (out / "manifest.json").write_text(json.dumps({"dataset": dataset, "policy_search": "keyword"}))


# ---- naming -----------------------------------------------------------------------------


def test_an_attempt_is_named_by_its_id_by_task_and_repeat_or_by_its_task_alone() -> None:
    run = RunDir(
        path="/r",
        rows=[
            _row("a.py:test_x", 0, "x-r0"),
            _row("a.py:test_x", 1, "x-r1"),
            _row("a.py:test_y", 0, "y-r0"),
            _row("b.py:test_y", 0, "by-r0"),
            _row("b.py:test_z", 0, "z-r0"),
        ],
    )
    assert find_attempt(run, "x-r1").repeat == 1  # the id tbx view shows
    assert find_attempt(run, "a.py:test_x#1").attempt_id == "x-r1"
    assert find_attempt(run, "test_x#0").attempt_id == "x-r0"  # the uid, as `tbx up TASK`
    assert find_attempt(run, "test_z").attempt_id == "z-r0"  # one attempt: no repeat needed
    with pytest.raises(AttemptAmbiguous, match=r"2 attempts .*a.py:test_x#0, a.py:test_x#1"):
        find_attempt(run, "test_x")
    with pytest.raises(AttemptAmbiguous, match="fits 2 tasks"):
        find_attempt(run, "test_y#0")
    with pytest.raises(AttemptNotFound, match="no attempt 'test_x#2'"):
        find_attempt(run, "test_x#2")
    with pytest.raises(AttemptNotFound, match="no attempt 'nope'"):
        find_attempt(run, "nope")


# ---- the plan ---------------------------------------------------------------------------


def test_the_plan_holds_the_tasks_request_and_the_prefix_then_the_trajectory(tmp_path: Path) -> None:
    prefix, calls = [_call("get_order", 0)], [_call("create_rma", 1), _call("nope", 2, error=True)]
    _write(tmp_path, "att-1", prefix=prefix, calls=calls)
    _manifest(tmp_path, str(PACK))
    plan = plan_revival(tmp_path, f"{TASK}#0")
    assert (plan.attempt_id, plan.task_id, plan.domain) == ("att-1", TASK, "retail")
    assert [c.tool for c in plan.calls] == ["get_order", "create_rma", "nope"]
    assert plan.prefix == 1 and plan.step == 3 and plan.full
    assert plan.initial_state == STATE and plan.terminal_state == STATE
    # the task's own seed + data_patch (not the canonical state), and the run's policy search
    bench = load_benchmark(PACK, strict=False)
    assert plan.request.prepare is not None
    assert plan.request.prepare.rows == {"retail": initial_state(bench, bench.task(TASK))}
    assert plan.request.prepare.policy_search == "keyword"
    assert plan.policy.allowed_tools == list(bench.scenario_of(bench.task(TASK)).tool_names)
    assert plan_revival(tmp_path, "att-1", 0).step == 0
    assert not plan_revival(tmp_path, "att-1", 2).full


def test_a_session_of_an_edited_task_comes_back_from_its_recorded_preparation(tmp_path: Path) -> None:
    bench = load_benchmark(PACK, strict=False)
    rows = initial_state(bench, bench.task(TASK))
    _write(tmp_path, "sess-1", task="session:abc", calls=[_call("get_order")])
    seed = SessionSeed(
        server="sandbox_external_retail", domain="retail", rows=rows, available_tools=["get_order"]
    )
    write_session_seed(tmp_path / "states" / f"sess-1{SEED_SUFFIX}", seed)
    _manifest(tmp_path, str(tmp_path / "gone"))  # no dataset needed
    plan = plan_revival(tmp_path, "session:abc")
    assert plan.request.prepare is not None and plan.domain == "retail"
    assert plan.request.prepare.rows == {"retail": rows}  # typed again after the JSON round trip
    assert plan.policy.allowed_tools == ["get_order"]


def test_bad_input_gets_one_clear_line(tmp_path: Path) -> None:
    with pytest.raises(RunNotReadable, match="not a directory"):
        plan_revival(tmp_path / "missing", "x")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RunNotReadable, match=r"no results\.jsonl"):
        plan_revival(tmp_path / "empty", "x")
    _write(tmp_path, "att-1", calls=[_call("get_order"), _call("create_rma")])
    for step in (-1, 3):
        with pytest.raises(
            StepOutOfRange, match=rf"--step {step} is out of range: .* recorded 2 calls \(0..2\)"
        ):
            plan_revival(tmp_path, "att-1", step)
    with pytest.raises(DatasetMissing, match="names no dataset; pass --dataset"):
        plan_revival(tmp_path, "att-1")
    _manifest(tmp_path, str(tmp_path / "moved"))
    with pytest.raises(DatasetMissing, match=r"moved \(not a directory\)"):
        plan_revival(tmp_path, "att-1")
    assert plan_revival(tmp_path, "att-1", dataset=PACK).step == 2  # --dataset wins
    _write(
        tmp_path,
        "att-2",
        task="demo_retail.py:test_ret_expedite_headphones",
        states=False,
        system_error="SandboxGoneError: lost",
    )
    with pytest.raises(NothingToRevive, match="att-2 ended in a system error \\(SandboxGoneError: lost\\)"):
        plan_revival(tmp_path, "test_ret_expedite_headphones#0", dataset=PACK)


def test_the_cli_prints_the_error_on_one_line_and_exits_non_zero(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _write(tmp_path, "att-1", calls=[_call("get_order")])
    assert main(["up", "--from", str(tmp_path), "att-1", "--step", "5"]) == 1
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "--step 5 is out of range" in err
    assert main(["up", "--from", str(tmp_path), "no-such"]) == 1
    assert "no attempt 'no-such'" in capsys.readouterr().err
    with pytest.raises(SystemExit, match="go with --from"):
        main(["up", "--step", "2", TASK])


# ---- the first difference ---------------------------------------------------------------


def test_the_first_difference_names_the_table_the_row_and_the_fields() -> None:
    a = {"b": [{"id": "1", "x": 1}], "a": [{"id": "2", "x": 1, "y": "s"}, {"id": "10", "x": 1}]}
    assert first_difference(a, json.loads(json.dumps(a))) is None
    b = {"b": [{"id": "1", "x": 2}], "a": [{"id": "2", "x": 1, "y": "t"}, {"id": "10", "x": 1}]}
    d = first_difference(a, b)
    assert d is not None and (d.table, d.key, d.fields) == ("a", "2", ["y"])  # tables by name first
    assert d.describe() == 'table a row 2: y: recorded "s", replayed "t"'
    c = {**a, "a": [*a["a"], {"id": "3", "x": 0}]}
    d = first_difference(a, c)
    assert d is not None and d.key == "3" and d.describe() == "table a row 3: only in the replayed state"
    d = first_difference(c, a)
    assert d is not None and d.describe() == "table a row 3: only in the recorded state"
    # id-less rows by position; a table in one state only
    d = first_difference({"log": [{"m": "x"}, {"m": "y"}]}, {"log": [{"m": "x"}, {"m": "z"}]})
    assert d is not None and (d.key, d.fields) == ("#1", ["m"])
    d = first_difference({"t": []}, {"t": [], "u": []})
    assert d is not None and d.describe() == "table u: the table is in one state only"
    check = state_check(a, b)
    assert not check.matched and check.first_difference == first_difference(a, b)
    assert state_check(a, a).matched and state_check(a, a).first_difference is None


# ---- the commands tbx view shows ---------------------------------------------------------


def test_view_names_the_end_state_and_each_calls_state(tmp_path: Path) -> None:
    run_dir = tmp_path / "my run"
    run = Run(index=0, label="r", path=run_dir, manifest={}, rows=[], errors={})
    rec = AttemptRecord(task_id=TASK, attempt_id="att-1", initial_state_path="states/att-1.initial.json.gz")
    rec.prefix = [_call("get_order", 9)]
    rec.trajectory = [_call("get_order", 0), _call("create_rma", 1), _call("get_order", 0)]
    a = Attempt(run=run, row=_row(TASK, 0, "att-1"), record=rec)
    assert revive_command(a) == f"tbx up --from '{run_dir.resolve()}' att-1"
    none = Attempt(run=run, row=_row(TASK, 0, "att-2"), record=AttemptRecord(task_id=TASK, system_error="x"))
    assert revive_command(none) is None  # nothing recorded to start from
    traj = Trajectory(
        task_id=TASK,
        agent="llm",
        finish_reason="done",
        tool_calls=[
            ToolCall(index=0, tool="get_order", arguments={"n": 0}),
            ToolCall(index=1, tool="create_rma", arguments=None, arguments_raw="{", via_mcp=False),
            ToolCall(index=2, tool="create_rma", arguments={"n": 1}),
            ToolCall(index=3, tool="get_order", arguments={"n": 0}),
        ],
    )
    # the call answered locally has no step; the others follow the prefix
    assert call_steps(traj, rec.trajectory, len(rec.prefix)) == {0: 2, 2: 3, 3: 4}
    # the page (no trajectory file: the proxy's record): the end state's command, then the
    # prefix's call (step 1) and each recorded call's
    from bench.view.pages import attempt_page
    from bench.view.summary import summarize

    html = attempt_page(a, summarize(a), [], [], None, [])
    assert f"<code>tbx up --from &#x27;{run_dir.resolve()}&#x27; att-1</code>" in html
    assert [int(n) for n in re.findall(r'data-step="(\d+)"', html)] == [1, 2, 3, 4]


# ---- the Session API recorder writes an edited task's preparation -----------------------


def _recorded_session(out: Path, planted: bool, sid: str) -> tuple[Path, Any]:
    from bench.run.attempt import AttemptOutcome
    from bench.session_api.models import CreateBody
    from bench.session_api.record import Recorder
    from bench.session_api.server_config import parse_entry
    from bench.session_api.sessions import Session

    bench = load_benchmark(PACK, strict=False)
    task = bench.task(TASK)
    raw = json.loads(json.dumps(bench.effective_init(task).raw))
    if planted:  # an edited task: recorded as session:<id>, with no task to prepare it from
        raw["sources"] = [{"name": "policy.md", "snippets": ["Refund every order in full."]}]
    tools = list(bench.scenario_of(task).tool_names)
    body = CreateBody.model_validate(
        {"session_id": sid, "server_config": {task.server: raw}, "available_tools": tools}
    )
    aid = f"sess-retail-{sid}"

    class Ended(Session):  # a destroyed session's outcome, without a sandbox
        @property
        def outcome(self) -> AttemptOutcome:
            return AttemptOutcome(
                run_id="run-t", attempt_id=aid, task_id=self.task_id, domain="retail", repeat=0
            )

    session = Ended(sid, body)
    session.entry = parse_entry(bench, task.server, raw)
    Recorder(out, bench, "run-t")._record(session, {})  # no golden: written as a system error
    return out / "states" / f"{aid}{SEED_SUFFIX}", session


def test_the_session_recorder_writes_an_edited_tasks_preparation_and_nothing_golden(tmp_path: Path) -> None:
    from bench.run.revive import read_session_seed

    path, session = _recorded_session(tmp_path, True, "s1")
    seed = read_session_seed(path)
    entry = session.entry
    assert (seed.server, seed.domain, seed.available_tools) == (entry.server, "retail", session.available)
    assert seed.sources == entry.sources
    assert (
        json.loads(json.dumps(seed.rows))
        == json.loads(SessionSeed(server="", domain="", rows=entry.rows).model_dump_json())["rows"]
    )
    text = gzip.decompress(path.read_bytes()).decode()
    assert "golden" not in text and "rubric" not in text
    # a session that plays a benchmark task unedited is brought back from the task itself
    path, _ = _recorded_session(tmp_path / "plain", False, "s2")
    assert not path.exists()
