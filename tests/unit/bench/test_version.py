"""`tbx --version` and the manifest's git_commit: the wheel's build record when installed,
git in a checkout, and `commit unknown` rather than an error or a neighbour's commit."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import version
from bench.cli.main import main
from bench.source_commit import head_commit

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(autouse=True)
def fresh_answers() -> Iterator[None]:
    version.recorded.cache_clear()
    version.source_commit.cache_clear()
    yield
    version.recorded.cache_clear()
    version.source_commit.cache_clear()


def test_a_checkout_asks_git(capsys: pytest.CaptureFixture[str]) -> None:
    head = subprocess.run(["git", "-C", str(REPO), "rev-parse", "HEAD"], capture_output=True, text=True)
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    line = capsys.readouterr().out.strip()
    assert line.startswith(f"tbx {version.tbx_version()} (commit {head.stdout.strip()}")
    assert version.source_commit() == head.stdout.strip()


@pytest.mark.parametrize(
    ("record", "line_end", "commit"),
    [
        ('{"commit": "1f2e3d", "modified": false}', "(commit 1f2e3d)", "1f2e3d"),
        ('{"commit": "1f2e3d", "modified": true}', "(commit 1f2e3d, modified)", "1f2e3d"),
        ('{"commit": null, "modified": false}', "(commit unknown)", None),  # built without git
        ("not json", "(commit unknown)", None),
    ],
    ids=["clean", "modified", "unknown", "unreadable"],
)
def test_an_installed_wheel_says_what_it_recorded(
    record: str, line_end: str, commit: str | None, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    info = tmp_path / "build_info.json"
    info.write_text(record)
    monkeypatch.setattr(version, "BUILD_INFO", info)
    assert version.version_line().endswith(line_end)
    assert version.source_commit() == commit  # never git's answer about the tree around it


def test_only_a_tree_rooted_at_the_checkout_has_a_commit(tmp_path: Path) -> None:
    assert head_commit(REPO) is not None
    assert head_commit(REPO / "bench") is None  # inside a repository, not its root: site-packages-like
    assert head_commit(tmp_path) is None
