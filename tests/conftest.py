from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def dataset_path() -> Path:
    """The ThinkingBox-Bench export: $TBX_DATASET, else ../shared beside the repo.
    Tests that need it fail (not skip) when it is missing: CI always has it."""
    path = Path(os.environ.get("TBX_DATASET", REPO.parent / "shared/benchmarks/thinkingbox-bench-v1"))
    if not (path / "releases").is_dir():
        pytest.fail(f"benchmark export not found at {path} (set TBX_DATASET)")
    return path


@pytest.fixture(scope="session")
def dataset() -> Path:
    return dataset_path()
