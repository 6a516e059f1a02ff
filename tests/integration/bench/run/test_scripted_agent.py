"""`tbx run --agent scripted --script FILE` on the demo pack in real sandboxes (one run,
two tasks, one attempt each): the script of one task's golden calls passes; the other
task's golden calls with one wrong argument fail with the signature the judge gives a
wrong value, and a call to a tool the sandbox does not serve is answered with a tool
error and recorded, like any agent's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from pg_support import DEMO_PACK

from bench.dataset import load_benchmark
from bench.rollout.trajectory import Trajectory
from bench.run.results import read_rows

pytestmark = pytest.mark.docker

GOOD = "demo_retail.py:test_ret_expedite_headphones"
WRONG = "demo_retail.py:test_ret_defective_speaker_refund"


def test_a_golden_script_passes_and_a_wrong_argument_fails(tmp_path: Path) -> None:
    pack = load_benchmark(DEMO_PACK)
    good = [{"tool": t, "arguments": a} for t, a in pack.golden_calls(pack.task(GOOD))]
    wrong = [{"tool": t, "arguments": dict(a)} for t, a in pack.golden_calls(pack.task(WRONG))]
    refund = next(c for c in wrong if c["tool"] == "create_refund")
    refund["arguments"]["amount"] = refund["arguments"]["amount"] + 10
    wrong.insert(0, {"tool": "no_such_tool", "arguments": {}})
    script = tmp_path / "script.json"
    script.write_text(json.dumps({GOOD: {"calls": good, "final": "Expedited."}, WRONG: {"calls": wrong}}))
    out = tmp_path / "run"
    argv = ["run", "--dataset", str(DEMO_PACK), "--tasks", f"{GOOD},{WRONG}", "--agent", "scripted"]
    argv += ["--script", str(script), "--repeat", "1", "--concurrency", "2", "--out", str(out)]
    argv += ["--golden-cache", str(tmp_path / "golden"), "--plain"]
    proc = subprocess.run(
        [sys.executable, "-m", "bench.cli", *argv], capture_output=True, text=True, timeout=600
    )
    assert proc.returncode == 0, proc.stderr
    assert "done: 2 attempts, 1 passed, 1 failed, 0 system errors" in proc.stderr

    rows = {r.task_id: r for r in read_rows(out / "results.jsonl")}
    assert rows[GOOD].passed and rows[GOOD].signature is None
    assert not rows[WRONG].passed and not rows[WRONG].system_error
    assert rows[WRONG].signature == "wrong_state_update"
    traj = Trajectory.model_validate_json((out / (rows[WRONG].model_extra or {})["trajectory"]).read_text())
    assert [c.tool for c in traj.tool_calls] == [c["tool"] for c in wrong]
    assert traj.tool_calls[0].is_error and all(not c.is_error for c in traj.tool_calls[1:])
    assert traj.final_message == ""
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["agent"] == "scripted"
    assert (
        manifest["agent_script"]["path"] == str(script.resolve()) and manifest["agent_script"]["tasks"] == 2
    )
