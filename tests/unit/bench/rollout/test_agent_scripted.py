"""The `scripted` agent (`tbx run --agent scripted --script FILE`): the file's form and its
one-line errors, the brief it gives each task, the CLI's usage errors and warning, the
manifest and bundle entry, and attempts played against the fake provider (the domain's
real server in process behind the real tool proxy): a script of the golden calls passes,
one wrong argument fails with the signature the judge gives it."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from attempt_fakes import PACK, TASK, FakeProvider, golden_in_process

from bench.cli.main import main
from bench.cli.run import agent_script_for
from bench.dataset import Benchmark
from bench.rollout.agents import AgentScript, AgentScriptError, load_agent_script, parse_agent_script
from bench.rollout.brief import task_brief
from bench.rollout.trajectory import Trajectory
from bench.run import output
from bench.run.coordinator import Coordinator, RunOptions
from bench.run.errors import BundleChanged, RunUsageError
from bench.run.golden import GoldenStore
from bench.run.results import read_rows

OTHER = "demo_retail.py:test_ret_defective_speaker_refund"


def _golden_script(pack: Benchmark, task_id: str, final: str = "Done, expedited.") -> dict[str, Any]:
    calls = [{"tool": t, "arguments": a} for t, a in pack.golden_calls(pack.task(task_id))]
    return {task_id: {"calls": calls, "final": final}}


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ([], 'expected a JSON object {"<task id>": {"calls": [...], "final": "..."}}'),
        ({"t": {"calls": {"tool": "x"}}}, "t.calls: Input should be a valid list"),
        ({"t": {"calls": [{"arguments": {}}]}}, "t.calls.0.tool: Field required"),
        (
            {"t": {"calls": [{"tool": "x", "arguments": "{}"}]}},
            "t.calls.0.arguments: Input should be a valid dictionary",
        ),
        ({"t": {"call": []}}, "t.call: Extra inputs are not permitted"),
        ({"t": {"final": 3}}, "t.final: Input should be a valid string"),
        (
            {"t": {"calls": [{"tool": ""}, {"tool": 1}]}},
            "t.calls.0.tool: String should have at least 1 character (and 1 more)",
        ),
    ],
)
def test_a_malformed_script_is_one_line_naming_the_place(data: Any, message: str) -> None:
    with pytest.raises(AgentScriptError) as info:
        parse_agent_script(data, "s.json")
    assert str(info.value) == f"s.json: {message}"


def test_an_unreadable_or_non_json_file_is_one_line(tmp_path: Path) -> None:
    with pytest.raises(AgentScriptError, match=r"^cannot read .*nope\.json: No such file or directory$"):
        load_agent_script(tmp_path / "nope.json")
    bad = tmp_path / "bad.json"
    bad.write_text('{"t": {"calls": [}')
    with pytest.raises(AgentScriptError, match=r"bad\.json: not JSON \(Expecting value: line 1"):
        load_agent_script(bad)


def test_the_brief_carries_the_tasks_entry_by_id_or_uid(pack: Benchmark) -> None:
    task = pack.task(TASK)
    script = parse_agent_script(
        {TASK: {"calls": [{"tool": "get_order", "arguments": {"order_id": "O-1"}}], "final": "bye"}}
    )
    brief = task_brief(pack, task, "scripted", agent_script=script)
    assert brief.script is not None and brief.script.agent == "scripted"
    assert brief.script.calls == [("get_order", {"order_id": "O-1"})] and brief.script.final == "bye"
    # a bare test uid names the task as well
    by_uid = parse_agent_script({task.uid: {"calls": [{"tool": "get_order"}]}})
    brief = task_brief(pack, task, "scripted", agent_script=by_uid)
    assert brief.script is not None and brief.script.calls == [("get_order", {})] and brief.script.final == ""
    # a task missing from the file: no calls, an empty final text
    brief = task_brief(pack, pack.task(OTHER), "scripted", agent_script=script)
    assert brief.script is not None and brief.script.calls == [] and brief.script.final == ""
    # and no prompt of the dataset: a built-in agent
    assert brief.parallel_tool_calls is None
    with pytest.raises(ValueError, match=r"needs a script file \(--script FILE\)"):
        task_brief(pack, task, "scripted")


def _run_cli(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, list[str]]:
    code = main(argv)
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return code, err.splitlines()


@pytest.mark.parametrize(
    ("agent", "script", "line"),
    [
        ("scripted", "bad", "tbx run: --script: {path}: t.calls.0.tool: Field required"),
        ("scripted", None, "tbx run: agent 'scripted' needs --script FILE (the calls it plays)"),
        ("oracle", "good", "tbx run: --script is for --agent scripted, not 'oracle'"),
    ],
)
def test_usage_errors_exit_2_before_anything_is_written(
    agent: str, script: str | None, line: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    files = {"bad": tmp_path / "bad.json", "good": tmp_path / "good.json"}
    files["bad"].write_text(json.dumps({"t": {"calls": [{"arguments": {}}]}}))
    files["good"].write_text("{}")
    out = tmp_path / "out"
    argv = ["run", "--dataset", str(PACK), "--agent", agent, "--out", str(out)]
    if script is not None:
        argv += ["--script", str(files[script])]
    code, lines = _run_cli(argv, capsys)
    assert code == 2
    assert lines == [line.format(path=files["bad"])]
    assert not out.exists()


def test_keys_naming_no_task_of_the_run_are_a_warning(
    pack: Benchmark, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    task = pack.task(TASK)
    path = tmp_path / "s.json"
    path.write_text(json.dumps({TASK: {}, "x.py:test_gone": {}, OTHER: {}}))
    script = agent_script_for("scripted", str(path), [task])
    assert script is not None and set(script.root) == {TASK, "x.py:test_gone", OTHER}
    assert capsys.readouterr().err.splitlines() == [
        f"tbx run: warning: --script names 2 task(s) not in this run: {OTHER}, x.py:test_gone"
    ]
    assert agent_script_for("oracle", None, [task]) is None
    with pytest.raises(RunUsageError):
        agent_script_for("scripted", str(tmp_path / "missing.json"), [task])


def test_the_script_is_in_the_manifest_and_the_bundle_only_when_given(tmp_path: Path) -> None:
    bench = type("B", (), {"root": tmp_path, "release": None})()
    common: dict[str, Any] = dict(
        agent="scripted", repeats=1, run_name=None, images={}, digests={}, config=None, data_hash="h"
    )
    a = parse_agent_script({"t": {"calls": [{"tool": "x", "arguments": {"n": 1}}]}})
    spaced = AgentScript.model_validate(json.loads(json.dumps(a.model_dump(), indent=4)))
    b = parse_agent_script({"t": {"calls": [{"tool": "x", "arguments": {"n": 2}}]}})
    assert a.digest() == spaced.digest() != b.digest()
    first = output.write_manifest(tmp_path, bench, agent_script=a.manifest_entry(Path("/s.json")), **common)  # type: ignore[arg-type]
    assert first["agent_script"] == {"path": "/s.json", "sha256": a.digest(), "tasks": 1}
    (tmp_path / "manifest.json").unlink()
    other = output.write_manifest(tmp_path, bench, agent_script=b.manifest_entry(Path("/s.json")), **common)  # type: ignore[arg-type]
    assert other["bundle_hash"] != first["bundle_hash"]
    (tmp_path / "manifest.json").unlink()
    # no script: the key is absent and the bundle hash is what it always was
    plain = output.write_manifest(tmp_path, bench, **common)  # type: ignore[arg-type]
    assert "agent_script" not in plain
    # (the rubric judge's style is in every new manifest's bundle; the script adds nothing)
    keys = (*output.BUNDLE_KEYS, "rubric_judge")
    assert plain["bundle_hash"] == output.bundle_hash({k: plain[k] for k in keys})


def _trajectory(out: Path, row: Any) -> Trajectory:
    return Trajectory.model_validate_json((out / (row.model_extra or {})["trajectory"]).read_text())


def test_scripted_attempts_pass_fail_and_resume_only_with_the_same_script(
    pack: Benchmark, provider: FakeProvider, make_database: Any, tmp_path: Path
) -> None:
    task = pack.task(TASK)
    store = GoldenStore(pack, tmp_path / "golden", image_id="in-process", allow_replay=False)
    store.save(golden_in_process(make_database, pack, task, key=store.key(task)))
    good = parse_agent_script(_golden_script(pack, TASK))
    wrong = json.loads(json.dumps(_golden_script(pack, TASK)))
    charge = next(c for c in wrong[TASK]["calls"] if c["tool"] == "charge_customer")
    charge["arguments"]["amount"] = 25.0

    def run(out: Path, script: AgentScript) -> dict[str, int]:
        opts = RunOptions(
            out=out, agent="scripted", repeat=1, agent_script=script, agent_script_path=Path("s.json")
        )
        return asyncio.run(Coordinator(pack, opts, provider=provider, golden=store).run([task]))

    assert run(tmp_path / "good", good)["passed"] == 1
    [row] = read_rows(tmp_path / "good/results.jsonl")
    traj = _trajectory(tmp_path / "good", row)
    assert [c.tool for c in traj.tool_calls] == [t for t, _ in pack.golden_calls(task)]
    assert all(c.via_mcp and not c.is_error for c in traj.tool_calls)
    assert traj.finish_reason == "done" and traj.final_message == "Done, expedited."
    manifest = json.loads((tmp_path / "good/manifest.json").read_text())
    assert manifest["agent"] == "scripted" and manifest["agent_script"]["sha256"] == good.digest()

    counts = run(tmp_path / "wrong", parse_agent_script(wrong))
    assert counts["failed"] == 1 and counts["errors"] == 0
    [row] = read_rows(tmp_path / "wrong/results.jsonl")
    assert not row.passed and not row.system_error and row.signature == "wrong_state_update"

    # a changed script is a changed bundle: the run refuses to resume into the old results
    with pytest.raises(BundleChanged, match="agent_script"):
        run(tmp_path / "wrong", good)


def test_a_task_missing_from_the_script_makes_no_call_and_ends_with_empty_text(
    pack: Benchmark, provider: FakeProvider, make_database: Any, tmp_path: Path
) -> None:
    task = pack.task(TASK)
    store = GoldenStore(pack, tmp_path / "golden", image_id="in-process", allow_replay=False)
    store.save(golden_in_process(make_database, pack, task, key=store.key(task)))
    opts = RunOptions(out=tmp_path / "run", agent="scripted", repeat=1, agent_script=parse_agent_script({}))
    counts = asyncio.run(Coordinator(pack, opts, provider=provider, golden=store).run([task]))
    assert counts["failed"] == 1
    [row] = read_rows(tmp_path / "run/results.jsonl")
    assert row.signature == "no_state_change"
    traj = _trajectory(tmp_path / "run", row)
    assert traj.tool_calls == [] and traj.finish_reason == "done" and traj.final_message == ""
