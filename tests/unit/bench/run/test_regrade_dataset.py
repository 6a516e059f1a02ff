"""Which dataset `tbx judge regrade` grades a run against (bench.run.run_dataset):
the one the run's manifest names, else --dataset, else one clear error line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pg_support import DEMO_PACK

import bench.run.regrade as regrade_mod
from bench.cli.main import main
from bench.run.regrade import RegradeSummary
from bench.run.run_dataset import DatasetNotFound, recorded_dataset_paths, run_benchmark, run_task_ids

DEMO = DEMO_PACK
DEMO_TASK = "demo_retail.py:test_ret_expedite_headphones"


def make_run(tmp_path: Path, task_ids: list[str], dataset: str | None) -> Path:
    run = tmp_path / "run"
    (run / "attempts").mkdir(parents=True)
    rows = [{"task_id": t, "repeat": 0, "domain": "retail", "passed": False} for t in task_ids]
    (run / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows) + "{torn")
    manifest: dict[str, Any] = {"run_name": "demo"}
    if dataset is not None:
        manifest["dataset"] = dataset
    (run / "manifest.json").write_text(json.dumps(manifest))
    return run


def test_the_manifests_dataset_wins_over_the_fallback(tmp_path: Path) -> None:
    empty = tmp_path / "empty-dataset"
    empty.mkdir()
    run = make_run(tmp_path, [DEMO_TASK], str(DEMO))
    assert run_task_ids(run) == [DEMO_TASK]  # a torn last line is skipped
    assert run_benchmark(run, run_task_ids(run), empty).root == DEMO


def test_falls_back_to_dataset_when_the_recorded_one_is_gone_or_lacks_the_tasks(tmp_path: Path) -> None:
    gone = make_run(tmp_path, [DEMO_TASK], str(tmp_path / "moved-away"))
    assert run_benchmark(gone, [DEMO_TASK], DEMO).root == DEMO


def test_neither_dataset_holds_the_task(tmp_path: Path) -> None:
    run = make_run(tmp_path, ["nosuch.py:test_x"], str(DEMO))
    with pytest.raises(DatasetNotFound) as err:
        run_benchmark(run, run_task_ids(run), tmp_path / "nope")
    text = str(err.value)
    assert f"{DEMO} (lacks 1 of the run's 1 tasks, e.g. nosuch.py:test_x)" in text
    assert f"{tmp_path / 'nope'} (not a directory)" in text and "pass --dataset DIR" in text


def test_a_relative_recorded_path_is_tried_where_tbx_run_may_have_run(tmp_path: Path) -> None:
    paths = recorded_dataset_paths({"dataset": "bench/packs/demo"}, tmp_path)
    assert paths[0] == Path("bench/packs/demo") and tmp_path / "bench/packs/demo" in paths
    assert DEMO in paths
    assert (
        recorded_dataset_paths({}, tmp_path) == [] and recorded_dataset_paths({"dataset": 3}, tmp_path) == []
    )


def test_cli_regrades_a_demo_pack_run_against_the_demo_pack(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    seen: list[Path] = []

    async def fake_regrade(results: Path, bench: Any, *args: Any, **kw: Any) -> RegradeSummary:
        seen.append(bench.root)
        return RegradeSummary()

    monkeypatch.setattr(regrade_mod, "regrade", fake_regrade)
    run = make_run(tmp_path, [DEMO_TASK], str(DEMO))
    assert main(["judge", "regrade", str(run), "--no-replay", "--golden-cache", str(tmp_path / "c")]) == 0
    assert seen == [DEMO]
    capsys.readouterr()


def test_cli_one_error_line_and_exit_2_when_no_dataset_has_the_tasks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path, ["nosuch.py:test_\x1b[2Jx"], str(DEMO))
    assert main(["judge", "regrade", str(run), "--dataset", str(DEMO)]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith(
        "tbx judge regrade: no dataset holds the run's tasks"
    )
    assert "\x1b" not in err and "nosuch.py:test_\\x1b[2Jx" in err
