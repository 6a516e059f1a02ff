"""`tbx judge regrade` over a synthetic results directory: verdicts are
recomputed from recorded states and trajectories (golden states from a
pre-filled cache, no sandbox, no agent), records rewritten, summary printed."""

from __future__ import annotations

import gzip
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

import bench.dataset as dataset_mod
import bench.run.golden as golden_mod
from bench.cli.main import main
from bench.dataset import Benchmark, load_benchmark
from bench.prepare import initial_state
from bench.run.golden import GoldenStore
from bench.run.output import BUNDLE_KEYS, bundle_hash
from judge import (
    AttemptRecord,
    GoldenState,
    RubricAnswer,
    State,
    ToolCallView,
    canonical_state,
    read_attempt,
    state_hash,
    write_attempt,
    write_state,
)
from judge.rubric import SYSTEM_PROMPT
from judge.yesno import TEXT_YESNO_SYSTEM
from servers.registry import load_domain

STATE_TASK = "sandbox_external_retail_group1.py:test_case_ST002_003"
RUBRIC_TASK = "external_booking_v1_group1_rubrics_yesno.py:test_bmd_004"
IMAGE = "sha256:regrade-test"


def fill_cache(bench: Benchmark, dataset: Path, cache: Path, task_id: str) -> GoldenState:
    task = bench.task(task_id)
    store = GoldenStore(bench, cache, image_id=IMAGE)
    initial: State = canonical_state(load_domain(task.domain).tables, initial_state(bench, task))
    gz = dataset / "traces/canonical_states" / (task_id.replace(":", "__") + ".json.gz")
    final: State = json.loads(gzip.decompress(gz.read_bytes()))
    golden = GoldenState(
        task_id=task_id,
        key=store.key(task),
        initial_state=initial,
        final_state=final,
        initial_hash=state_hash(initial),
        golden_hash=state_hash(final),
    )
    store.save(golden)
    return golden


def test_regrade_results_dir(
    dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    bench = load_benchmark(dataset, strict=False)
    cache = tmp_path / "cache"
    g = fill_cache(bench, dataset, cache, STATE_TASK)
    gr = fill_cache(bench, dataset, cache, RUBRIC_TASK)
    monkeypatch.setattr(golden_mod, "servers_image_id", lambda: IMAGE)

    results = tmp_path / "results"
    attempts = results / "attempts"
    rubrics = bench.effective_init(bench.task(RUBRIC_TASK)).rubrics_yesno
    assert len(rubrics) == 2
    stale_pass = {
        "task_id": STATE_TASK,
        "passed": True,
        "strict": True,
        "terminal_hash": "x",
        "golden_hash": "x",
        "initial_hash": "x",
    }
    bad_call = ToolCallView.from_reply(
        "create_refund", {"amount": -1}, '{"error": "Tool execution failed: no"}', False
    )
    write_state(attempts / "states/a2.initial.json.gz", g.initial_state)
    write_state(attempts / "states/a2.terminal.json.gz", g.initial_state)
    records: dict[str, dict[str, Any]] = {
        # passes: ends in the golden state
        "a1": {"task_id": STATE_TASK, "initial_state": g.initial_state, "terminal_state": g.final_state},
        # recorded as a pass, but nothing changed: states in files; an invalid call never retried
        "a2": {
            "task_id": STATE_TASK,
            "initial_state_path": "states/a2.initial.json.gz",
            "terminal_state_path": "states/a2.terminal.json.gz",
            "trajectory": [bad_call.model_dump()],
            "verdict": stale_pass,
            "model": "runner-field-kept",
        },
        # a system error: skipped
        "a3": {"task_id": STATE_TASK, "system_error": "container failed"},
        # rubric task: state right, one rubric answered no
        "a4": {
            "task_id": RUBRIC_TASK,
            "terminal_state": gr.final_state,
            "final_message": "done",
            "rubric_answers": [
                RubricAnswer(question=rubrics[0], answer="yes").model_dump(),
                RubricAnswer(question=rubrics[1], answer="no", reason="r").model_dump(),
            ],
        },
        # rubric task without answers and no judge: an error, not a verdict
        "a6": {"task_id": RUBRIC_TASK, "terminal_state": gr.final_state, "final_message": "done"},
    }
    for name, rec in records.items():
        write_attempt(attempts / f"{name}.json", AttemptRecord.model_validate({"attempt_id": name, **rec}))
    # a5 lives elsewhere and is found through results.jsonl
    write_attempt(
        results / "elsewhere/a5.json",
        AttemptRecord(attempt_id="a5", task_id=STATE_TASK, terminal_state=g.final_state),
    )
    rows = [
        {
            "attempt_file": "elsewhere/a5.json",
            "task_id": STATE_TASK,
            "passed": False,
            "signature": "tool_use",
        },
        {
            "attempt_file": "attempts/a2.json",
            "task_id": STATE_TASK,
            "passed": True,
            "signature": None,
            "other": 1,
        },
    ]
    (results / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))

    code = main(
        [
            "judge",
            "regrade",
            str(results),
            "--dataset",
            str(dataset),
            "--golden-cache",
            str(cache),
            "--no-replay",
        ]
    )
    out = capsys.readouterr().out
    assert code == 1, out  # a6 could not be regraded
    assert "regraded 4/6 attempts: 2 passed" in out
    assert "skipped 1 attempts with system errors" in out
    assert "failure signatures: rubric_failed 1, tool_use 1" in out
    assert "a2.json (sandbox_external_retail_group1.py:test_case_ST002_003): pass -> fail" in out
    assert "a6.json: RegradeError" in out and "no usable rubric answers" in out

    a1 = read_attempt(attempts / "a1.json")
    assert a1.verdict is not None and a1.verdict.passed and a1.verdict.strict
    a2 = read_attempt(attempts / "a2.json")
    assert a2.verdict is not None and not a2.verdict.passed and a2.verdict.signature == "tool_use"
    assert a2.verdict.differences and all(d.kind == "missing_effect" for d in a2.verdict.differences)
    assert a2.model_extra == {"model": "runner-field-kept"}
    assert read_attempt(attempts / "a3.json").verdict is None
    a4 = read_attempt(attempts / "a4.json")
    assert a4.verdict is not None and a4.verdict.strict and not a4.verdict.passed
    assert a4.verdict.signature == "rubric_failed" and a4.verdict.rubrics_passed is False
    a5 = read_attempt(results / "elsewhere/a5.json")
    assert a5.verdict is not None and a5.verdict.passed
    new_rows = [json.loads(line) for line in (results / "results.jsonl").read_text().splitlines()]
    assert new_rows[0] == {**rows[0], "passed": True, "signature": None}
    assert new_rows[1] == {**rows[1], "passed": False, "signature": "tool_use"}

    # Regrading again changes nothing; --dry-run writes nothing.
    monkeypatch.setattr(dataset_mod, "load_benchmark", lambda *a, **kw: bench)  # already loaded once above
    before = (attempts / "a2.json").read_bytes()
    code = main(
        ["judge", "regrade", str(results), "--dataset", str(dataset), "--golden-cache", str(cache), "--no-replay",
         "--dry-run", "--json"]
    )  # fmt: skip
    summary = json.loads(capsys.readouterr().out)
    assert (
        code == 1 and summary["regraded"] == 4 and summary["changed"] == [] and summary["golden_replays"] == 0
    )
    assert (attempts / "a2.json").read_bytes() == before


def test_missing_results_dir(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["judge", "regrade", str(tmp_path / "nope")]) == 2
    assert "is not a directory" in capsys.readouterr().err


class YesJudge(ThreadingHTTPServer):
    """An OpenAI-compatible judge on 127.0.0.1 that answers every rubric question yes,
    in the style it is asked in (one word to the reference's prompt, else the JSON object)."""

    daemon_threads = True

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _YesHandler)
        self.questions: list[str] = []
        self.systems: list[str] = []

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}/v1"


class _YesHandler(BaseHTTPRequestHandler):
    server: YesJudge

    def log_message(self, *args: Any) -> None:
        pass

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        self.server.questions.append(body["messages"][-1]["content"])
        self.server.systems.append(body["messages"][0]["content"])
        one_word = body["messages"][0]["content"] == TEXT_YESNO_SYSTEM
        reply = {
            "id": "c1",
            "object": "chat.completion",
            "created": 0,
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {
                        "role": "assistant",
                        "content": "Yes" if one_word else '{"answer": "yes", "reason": "stub"}',
                    },
                }
            ],
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


@pytest.fixture
def yes_judge() -> Iterator[YesJudge]:
    srv = YesJudge()
    thread = threading.Thread(target=srv.serve_forever, daemon=True)
    thread.start()
    try:
        yield srv
    finally:
        srv.shutdown()
        srv.server_close()


def test_a_skip_rubrics_run_gets_its_rubrics_graded_once_a_judge_is_configured(
    dataset: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    yes_judge: YesJudge,
) -> None:
    bench = load_benchmark(dataset, strict=False)
    cache = tmp_path / "cache"
    gr = fill_cache(bench, dataset, cache, RUBRIC_TASK)
    monkeypatch.setattr(golden_mod, "servers_image_id", lambda: IMAGE)
    monkeypatch.setattr(dataset_mod, "load_benchmark", lambda *a, **kw: bench)
    for name in ("TBX_JUDGE_MODEL", "TBX_JUDGE_BASE_URL", "TBX_JUDGE_API_KEY"):
        monkeypatch.delenv(name, raising=False)
    rubrics = bench.effective_init(bench.task(RUBRIC_TASK)).rubrics_yesno

    # What a --skip-rubrics run writes for a rubric task: a verdict on state alone, no answers.
    results = tmp_path / "results"
    record = AttemptRecord(
        attempt_id="s1", task_id=RUBRIC_TASK, terminal_state=gr.final_state, final_message="done"
    )
    write_attempt(results / "attempts/s1.json", record)
    row = {
        "attempt_file": "attempts/s1.json",
        "task_id": RUBRIC_TASK,
        "passed": True,
        "rubrics_skipped": True,
    }
    (results / "results.jsonl").write_text(json.dumps(row) + "\n")
    argv = [
        "judge",
        "regrade",
        str(results),
        "--dataset",
        str(dataset),
        "--golden-cache",
        str(cache),
        "--no-replay",
    ]

    # No judge anywhere: judged on state again, and the summary says a judge is still wanted.
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "1 attempts of a --skip-rubrics run still judged on state alone" in out, out
    assert json.loads((results / "results.jsonl").read_text())["rubrics_skipped"] is True
    assert yes_judge.questions == []

    # A judge configured (in the environment, as for `tbx run`): the rubrics are graded.
    monkeypatch.setenv("TBX_JUDGE_MODEL", "judge-stub")
    monkeypatch.setenv("TBX_JUDGE_BASE_URL", yes_judge.url)
    monkeypatch.setenv("TBX_JUDGE_API_KEY", "stub-key")
    assert main(argv) == 0, capsys.readouterr().out
    out = capsys.readouterr().out
    assert "graded the rubrics of 1 attempts of a --skip-rubrics run" in out, out
    assert len(yes_judge.questions) == len(rubrics) == 2
    graded = read_attempt(results / "attempts/s1.json")
    assert graded.rubric_answers is not None and [a.question for a in graded.rubric_answers] == rubrics
    assert graded.verdict is not None and graded.verdict.passed and graded.verdict.rubrics_passed is True
    new_row = json.loads((results / "results.jsonl").read_text())
    assert new_row["rubrics_skipped"] is False and new_row["passed"] is True

    # Graded once: a third regrade reuses the recorded answers and asks nothing.
    assert main(argv) == 0
    assert len(yes_judge.questions) == 2


def test_regrade_asks_in_the_style_the_run_used(
    dataset: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    yes_judge: YesJudge,
) -> None:
    bench = load_benchmark(dataset, strict=False)
    cache = tmp_path / "cache"
    gr = fill_cache(bench, dataset, cache, RUBRIC_TASK)
    monkeypatch.setattr(golden_mod, "servers_image_id", lambda: IMAGE)
    monkeypatch.setattr(dataset_mod, "load_benchmark", lambda *a, **kw: bench)
    monkeypatch.setenv("TBX_JUDGE_MODEL", "judge-stub")
    monkeypatch.setenv("TBX_JUDGE_BASE_URL", yes_judge.url)
    monkeypatch.setenv("TBX_JUDGE_API_KEY", "stub-key")
    results = tmp_path / "results"
    record = AttemptRecord(
        attempt_id="s1", task_id=RUBRIC_TASK, terminal_state=gr.final_state, final_message=""
    )
    write_attempt(results / "attempts/s1.json", record)
    manifest = {**dict.fromkeys(BUNDLE_KEYS, "x"), "rubric_judge": "reference"}
    manifest["bundle_hash"] = bundle_hash(manifest)
    (results / "manifest.json").write_text(json.dumps(manifest))
    argv = [
        "judge",
        "regrade",
        str(results),
        "--dataset",
        str(dataset),
        "--golden-cache",
        str(cache),
        "--no-replay",
    ]

    # The run's style (its manifest's): the benchmark's prompt, the empty final message asked about.
    assert main(argv) == 0, capsys.readouterr()
    assert set(yes_judge.systems) == {TEXT_YESNO_SYSTEM} and len(yes_judge.questions) == 2
    assert all(q.startswith("<message>\n\n</message>\n") for q in yes_judge.questions)
    graded = read_attempt(results / "attempts/s1.json")
    assert graded.verdict is not None and graded.verdict.passed
    assert graded.rubric_answers and all(a.raw == "Yes" and a.usage for a in graded.rubric_answers)

    # Another style only when every rubric is asked again: no run holds answers of two styles.
    assert main([*argv, "--rubric-judge", "json"]) == 2
    assert "needs --rejudge-rubrics" in capsys.readouterr().err
    assert main([*argv, "--rubric-judge", "json", "--rejudge-rubrics"]) == 0
    assert yes_judge.systems[2:] == [SYSTEM_PROMPT, SYSTEM_PROMPT]
    now = json.loads((results / "manifest.json").read_text())
    assert now["rubric_judge"] == "json" and now["bundle_hash"] == bundle_hash(now) != manifest["bundle_hash"]
    graded = read_attempt(results / "attempts/s1.json")
    assert graded.rubric_answers and all(a.reason == "stub" for a in graded.rubric_answers)


class SpendingJudge:
    """A rubric judge (the `judge` regrade calls) whose first answer is yes and the rest
    unreadable, each having spent 100 input and 10 output tokens in 2 requests."""

    async def judge(self, rubrics: list[str], final_message: str | None) -> list[RubricAnswer]:
        spent = {"input_tokens": 100, "output_tokens": 10, "cached_tokens": 0, "requests": 2}
        return [
            RubricAnswer(question=q, answer="yes", model="j", usage=spent)
            if i == 0
            else RubricAnswer(question=q, error="judge error: not JSON", model="j", usage=spent)
            for i, q in enumerate(rubrics)
        ]


def test_a_rejudged_row_counts_the_judges_errors_and_spend(
    dataset: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from bench.run.regrade import format_summary, regrade

    bench = load_benchmark(dataset, strict=False)
    cache = tmp_path / "cache"
    gr = fill_cache(bench, dataset, cache, RUBRIC_TASK)
    monkeypatch.setattr(golden_mod, "servers_image_id", lambda: IMAGE)
    rubrics = bench.effective_init(bench.task(RUBRIC_TASK)).rubrics_yesno
    results = tmp_path / "results"
    record = AttemptRecord(
        attempt_id="j1",
        task_id=RUBRIC_TASK,
        terminal_state=gr.final_state,
        final_message="done",
        rubric_answers=[RubricAnswer(question=q, answer="yes") for q in rubrics],
    )
    write_attempt(results / "attempts/j1.json", record)
    earlier = {"model": "j", "input_tokens": 7, "output_tokens": 1}
    row = {
        "attempt_file": "attempts/j1.json",
        "task_id": RUBRIC_TASK,
        "passed": True,
        "usage": {"judge": earlier},
    }
    (results / "results.jsonl").write_text(json.dumps(row) + "\n")
    store = GoldenStore(bench, cache, image_id=IMAGE, allow_replay=False)

    summary = asyncio.run(regrade(results, bench, store, SpendingJudge(), rejudge_rubrics=True))  # type: ignore[arg-type]
    assert (summary.judge_errors, summary.judge_error_attempts) == (1, 1) and summary.passed == 0
    assert summary.judge_usage is not None and summary.judge_usage.input_tokens == 200
    assert json.loads(summary.model_dump_json())["judge_errors"] == 1  # what --json prints
    assert "judge errors: 1 rubric replies could not be read, in 1 attempts" in format_summary(summary)
    assert "judge spent 200 input (0 cached) / 20 output tokens in 4 requests" in format_summary(summary)
    new_row = json.loads((results / "results.jsonl").read_text())
    # the row's judge usage is the answers it now rests on; the replaced answers' spend stays counted
    assert new_row["usage"]["judge"]["input_tokens"] == 200 and new_row["usage"]["judge"]["calls"] == 4
    assert new_row["retried_usage"]["judge"]["input_tokens"] == 7
    assert new_row["judge_errors"] == 1 and new_row["passed"] is False
