"""tbx has no default benchmark (nothing beside the repository is a default): without
--dataset or $TBX_DATASET, every command that needs one is a usage error, exit 2, one
line, that says how to get one. The commands fail before Docker, so no daemon is needed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.cli.main import main
from bench.dataset import DATASET_ENV
from bench.dataset.loader import DEMO_PACK


def no_benchmark_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert "Traceback" not in err
    lines = err.splitlines()
    assert len(lines) == 1, lines
    return lines[0]


def says_how_to_get_one(line: str) -> None:
    assert line.startswith("tbx: no benchmark given: pass --dataset DIR or set TBX_DATASET=DIR.")
    assert "git clone https://github.com/microsoft/thinkingbox-data" in line
    assert "checkout thinkingbox-bench-v1.0" in line
    assert f"--dataset {DEMO_PACK}" in line  # the try-out, where this tbx has it
    assert (DEMO_PACK / "releases" / "testlist_demo.yaml").is_file()


@pytest.fixture
def no_dataset(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """No $TBX_DATASET, and a working directory with nothing in it."""
    monkeypatch.delenv(DATASET_ENV, raising=False)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    "argv",
    [
        ["run", "--agent", "oracle", "--out", "out"],
        ["up", "demo_retail.yaml:demo_retail_1"],
        ["conformance"],
        ["tasks", "validate"],
        ["tasks", "list"],
    ],
    ids=["run", "up", "conformance", "tasks-validate", "tasks-list"],
)
def test_a_command_without_a_benchmark_says_how_to_get_one(
    argv: list[str], no_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    says_how_to_get_one(no_benchmark_line(argv, capsys))
    assert list(no_dataset.iterdir()) == []  # no output directory, nothing started


def test_regrade_of_a_run_naming_no_dataset_says_how_to_get_one(
    no_dataset: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = no_dataset / "run"
    run.mkdir()
    (run / "results.jsonl").write_text(json.dumps({"task_id": "demo_retail.yaml:demo_retail_1"}) + "\n")
    says_how_to_get_one(no_benchmark_line(["judge", "regrade", str(run)], capsys))


def test_tbx_dataset_is_the_default(
    no_dataset: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(DATASET_ENV, str(DEMO_PACK))
    assert main(["tasks", "validate"]) == 0
    assert capsys.readouterr().out.splitlines()[-1].endswith(": OK")
