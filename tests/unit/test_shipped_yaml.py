"""Every YAML file the repository ships (the demo pack, examples, test data) loads with
PyYAML's pure-Python `SafeLoader`, not only with libyaml's `CSafeLoader` (tbx's own
reader, bench.dataset.yamlio): other tools read these files too. Where libyaml is
there, both loaders must give the same data."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]


def shipped_yaml() -> list[str]:
    listed = subprocess.run(
        ["git", "ls-files", "*.yaml", "*.yml"], cwd=REPO, capture_output=True, text=True, check=True
    )
    return sorted(listed.stdout.split())


def test_the_list_holds_the_demo_pack_and_the_example_config() -> None:
    files = shipped_yaml()
    assert "examples/model-config.yaml" in files
    assert sum(f.startswith("bench/packs/demo/") for f in files) >= 10, files


@pytest.mark.parametrize("path", shipped_yaml())
def test_loads_with_the_pure_python_loader(path: str) -> None:
    text = (REPO / path).read_text()
    pure: Any = yaml.load(text, Loader=yaml.SafeLoader)
    assert pure is not None
    if yaml.__with_libyaml__:
        assert yaml.load(text, Loader=yaml.CSafeLoader) == pure


def test_a_question_mark_in_a_flow_mapping_is_what_the_pure_loader_refuses() -> None:
    # What the demo pack held (issue 43): libyaml reads it, the pure-Python loader does not.
    flow = "{question: What was the name of your first pet?, answer: Biscuit}"
    with pytest.raises(yaml.YAMLError, match="expected ',' or '}', but got '\\?'"):
        yaml.load(flow, Loader=yaml.SafeLoader)
    quoted = '{question: "What was the name of your first pet?", answer: Biscuit}'
    assert yaml.load(quoted, Loader=yaml.SafeLoader) == {
        "question": "What was the name of your first pet?",
        "answer": "Biscuit",
    }
