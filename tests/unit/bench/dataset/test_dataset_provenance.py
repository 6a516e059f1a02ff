"""Where a run's data came from: a thinkingbox-data checkout's commit and tag in the
manifest, and a v1.0 run on data not at the pinned tag said so in the manifest, the
report and `tbx tasks validate`.

The checkouts are copies of tbx's demo pack (its own data) made git repositories in
tmp_path, with the release list under the v1.0 name where a test needs the pin."""

from __future__ import annotations

import io
import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from pg_support import DEMO_PACK

from bench.cli.main import main
from bench.cli.tasks import validate_command
from bench.dataset import load_benchmark
from bench.dataset.provenance import (
    NOT_A_CHECKOUT,
    V1_PIN,
    Pin,
    dataset_provenance,
    git_state,
)
from bench.report.build import build_report
from bench.report.html import render_html
from bench.report.markdown import render_markdown
from bench.run.output import BUNDLE_KEYS, merge_previous_manifest, write_manifest

PACK = DEMO_PACK
V1_RELEASE = f"releases/{V1_PIN.release}"

pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs the git CLI")


def git(root: Path, *args: str) -> str:
    identity = ["-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    signing = ["-c", "commit.gpgsign=false", "-c", "tag.gpgsign=false", "-c", "init.defaultBranch=main"]
    proc = subprocess.run(
        ["git", *identity, *signing, "-C", str(root), *args],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    )
    return proc.stdout.strip()


def data_copy(tmp_path: Path, *, v1: bool = True) -> Path:
    """The demo pack as a benchmark directory of its own; its release list renamed to
    the v1.0 release's when `v1`."""
    root = tmp_path / "thinkingbox-data"
    shutil.copytree(PACK, root)
    if v1:
        (root / "releases" / "testlist_demo.yaml").rename(root / V1_RELEASE)
    return root


def checkout(tmp_path: Path, *, v1: bool = True) -> tuple[Path, str]:
    """A git checkout at an annotated tag thinkingbox-bench-v1.0 (as the data repository's
    is); returns it and its commit."""
    root = data_copy(tmp_path, v1=v1)
    (root / "README.md").write_text("a benchmark\n")
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "data")
    git(root, "tag", "-a", "-m", "v1.0", V1_PIN.tag)
    return root, git(root, "rev-parse", "HEAD")


def pinned_to(commit: str) -> tuple[Pin, ...]:
    """The v1.0 pin moved to a test repository's commit (the real one cannot be made here)."""
    return (V1_PIN.model_copy(update={"commit": commit}),)


# ---- the state of a directory --------------------------------------------------------


def test_at_the_pinned_tag(tmp_path: Path) -> None:
    root, commit = checkout(tmp_path)
    p = dataset_provenance(root, V1_RELEASE, pinned_to(commit))
    assert (p.commit, p.tags, p.dirty) == (commit, [V1_PIN.tag], False)
    assert p.git == f"git {commit[:12]} (tag {V1_PIN.tag})"
    assert p.pinned is True and p.note is None


def test_the_commit_decides_not_a_tag_of_that_name(tmp_path: Path) -> None:
    root, commit = checkout(tmp_path)  # tagged thinkingbox-bench-v1.0, but not fcaba4c
    p = dataset_provenance(root, V1_RELEASE)
    assert p.pinned is False
    assert p.note == (
        f"data not pinned: canonical runs of release {V1_PIN.release} use tag {V1_PIN.tag} "
        f"(commit {V1_PIN.commit[:12]}); this dataset is at another commit: "
        f"git {commit[:12]} (tag {V1_PIN.tag})"
    )


def test_another_commit(tmp_path: Path) -> None:
    root, tagged = checkout(tmp_path)
    (root / "dataset" / "extra.txt").write_text("more\n")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "after the release")
    head = git(root, "rev-parse", "HEAD")
    p = dataset_provenance(root, V1_RELEASE, pinned_to(tagged))
    assert (p.commit, p.tags, p.dirty, p.pinned) == (head, [], False, False)
    assert p.git == f"git {head[:12]} (no tag)"
    assert p.note is not None and p.note.endswith(
        f"this dataset is at another commit: git {head[:12]} (no tag)"
    )


@pytest.mark.parametrize("change", ["modified", "untracked", "deleted"])
def test_modified_data_is_not_pinned(tmp_path: Path, change: str) -> None:
    root, commit = checkout(tmp_path)
    release = root / V1_RELEASE
    if change == "modified":
        release.write_text(release.read_text() + "# edited\n")
    elif change == "untracked":
        (root / "servers" / "new.json").write_text("{}")
    else:
        (root / "dataset" / "agent" / "demo.yaml").unlink()
    p = dataset_provenance(root, V1_RELEASE, pinned_to(commit))
    assert p.dirty is True and p.pinned is False
    assert p.git == f"git {commit[:12]} (tag {V1_PIN.tag}), data modified"
    assert p.note is not None and p.note.endswith(
        "this dataset is at the pinned commit with its data modified (dataset/, releases/, servers/)"
    )


def test_changes_outside_the_data_do_not_count(tmp_path: Path) -> None:
    root, commit = checkout(tmp_path)
    (root / "README.md").write_text("edited\n")
    (root / "results").mkdir()
    (root / "results" / "run.jsonl").write_text("{}\n")
    p = dataset_provenance(root, V1_RELEASE, pinned_to(commit))
    assert p.dirty is False and p.pinned is True


def test_not_a_checkout(tmp_path: Path) -> None:
    root = data_copy(tmp_path)
    p = dataset_provenance(root, V1_RELEASE)
    assert (p.git, p.commit, p.tags, p.dirty) == (NOT_A_CHECKOUT, None, [], None)
    assert p.pinned is False
    assert p.note is not None and p.note.endswith("this dataset is not a git checkout")


def test_a_release_without_a_pin_gets_no_note(tmp_path: Path) -> None:
    # The demo pack: not a checkout, and nothing to pin, so nothing but the fact.
    p = dataset_provenance(PACK, "releases/testlist_demo.yaml")
    assert (p.git, p.pinned, p.note) == (NOT_A_CHECKOUT, None, None)
    root, commit = checkout(tmp_path, v1=False)
    p = dataset_provenance(root, "releases/testlist_demo.yaml", pinned_to(commit))
    assert p.git == f"git {commit[:12]} (tag {V1_PIN.tag})" and (p.pinned, p.note) == (None, None)


def test_a_folder_inside_another_repository_is_not_a_checkout(tmp_path: Path) -> None:
    # The demo pack lives in tbx's own repository: tbx's commit is not the data's.
    outer = tmp_path / "repo"
    outer.mkdir()
    git(outer, "init", "-q")
    shutil.copytree(PACK, outer / "pack")
    git(outer, "add", ".")
    git(outer, "commit", "-q", "-m", "code and pack")
    assert git_state(outer / "pack").checkout is False


def test_git_missing_or_unreadable_never_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    state = git_state(empty)  # a repository without a commit
    assert state.checkout and state.commit is None and state.error
    assert state.summary().startswith("git checkout git could not read (")

    root, commit = checkout(tmp_path)
    monkeypatch.setenv("PATH", str(tmp_path / "no-bin"))
    p = dataset_provenance(root, V1_RELEASE, pinned_to(commit))
    assert p.git == "git checkout git could not read (git not found)"
    assert p.pinned is False and p.note is not None
    assert p.note.endswith("this dataset is git checkout git could not read (git not found)")


def test_git_environment_of_the_caller_is_ignored(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    other = tmp_path / "other"
    other.mkdir()
    git(other, "init", "-q")
    (other / "f").write_text("x")
    git(other, "add", ".")
    git(other, "commit", "-q", "-m", "other")
    root, commit = checkout(tmp_path)
    monkeypatch.setenv("GIT_DIR", str(other / ".git"))
    assert git_state(root).commit == commit


# ---- the manifest ------------------------------------------------------------------


def manifest_of(out: Path, root: Path) -> dict[str, Any]:
    bench = load_benchmark(root)
    return write_manifest(
        out, bench, agent="oracle", repeats=1, run_name=None, images={}, digests={}, config=None
    )


def test_the_manifest_records_provenance_outside_the_bundle(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    root, commit = checkout(tmp_path)
    monkeypatch.setattr("bench.dataset.provenance.PINS", pinned_to(commit))
    out = tmp_path / "out"
    out.mkdir()
    first = manifest_of(out, root)
    assert first["dataset_provenance"] == {
        "git": f"git {commit[:12]} (tag {V1_PIN.tag})",
        "commit": commit,
        "tags": [V1_PIN.tag],
        "dirty": False,
        "release": V1_RELEASE,
        "pinned": True,
        "note": None,
    }
    assert "dataset_provenance" not in BUNDLE_KEYS
    (out / "results.jsonl").write_text('{"task_id": "a", "repeat": 0}\n')

    # The same data under another commit resumes (dataset_hash is unchanged), and the
    # manifest says where the data is now.
    git(root, "commit", "-q", "--allow-empty", "-m", "no data change")
    resumed = manifest_of(out, root)
    assert resumed["bundle_hash"] == first["bundle_hash"]
    assert resumed["dataset_provenance"]["pinned"] is False
    assert "at another commit" in resumed["dataset_provenance"]["note"]
    assert json.loads((out / "manifest.json").read_text())["dataset_provenance"]["pinned"] is False


def test_a_manifest_from_before_provenance_still_resumes(tmp_path: Path) -> None:
    root = data_copy(tmp_path, v1=False)
    out = tmp_path / "out"
    out.mkdir()
    current = manifest_of(out, root)
    assert current["dataset_provenance"]["git"] == NOT_A_CHECKOUT
    assert current["dataset_provenance"]["note"] is None
    older = {k: v for k, v in current.items() if k != "dataset_provenance"}
    (out / "manifest.json").write_text(json.dumps(older))
    (out / "results.jsonl").write_text('{"task_id": "a", "repeat": 0}\n')
    merge_previous_manifest(out, dict(current))  # no BundleChanged


# ---- the report and tasks validate ----------------------------------------------------


def run_dir(tmp_path: Path, name: str, provenance: dict[str, Any] | None) -> Path:
    d = tmp_path / name
    d.mkdir()
    row = {"task_id": "retail/1", "repeat": 0, "domain": "retail", "passed": True}
    (d / "results.jsonl").write_text(json.dumps(row) + "\n")
    manifest: dict[str, Any] = {"run_name": name, "agent": "oracle", "repeats": 1}
    if provenance is not None:
        manifest["dataset_provenance"] = provenance
    (d / "manifest.json").write_text(json.dumps(manifest))
    return d


def test_the_report_says_when_data_was_not_pinned(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root, commit = checkout(tmp_path)
    (root / V1_RELEASE).write_text((root / V1_RELEASE).read_text() + "# edited\n")
    dirty = dataset_provenance(root, V1_RELEASE, pinned_to(commit)).model_dump(mode="json")
    clean = dataset_provenance(PACK, "releases/testlist_demo.yaml").model_dump(mode="json")
    runs = [
        run_dir(tmp_path, "dirty", dirty),
        run_dir(tmp_path, "demo", clean),
        run_dir(tmp_path, "old", None),
    ]
    report = build_report(runs)
    note = f"dirty: {dirty['note']}"

    md = render_markdown(report)
    assert f"- {note}" in md and md.count("data not pinned") == 1
    assert f"data: git {commit[:12]} (tag {V1_PIN.tag}), data modified" in md
    assert f"data: {NOT_A_CHECKOUT}" in md
    html = render_html(report)
    assert f"<li>{note}</li>" in html and html.count("data not pinned") == 1

    assert main(["report", *map(str, runs), "--out", str(tmp_path / "rep")]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert note in printed
    assert sum("data not pinned" in line for line in printed) == 1
    # A run written before provenance was recorded reports as before: no data line.
    old = next(r for r in report.runs if r.run == "old")
    assert old.data_provenance is None


def test_tasks_validate_says_where_the_data_came_from(tmp_path: Path) -> None:
    root, _ = checkout(tmp_path)
    out = io.StringIO()
    assert validate_command(root, out=out) == 0
    lines = out.getvalue().splitlines()
    # Tagged thinkingbox-bench-v1.0, but not the real commit: a warning, counted.
    assert lines[0].startswith(f"{V1_RELEASE}: warning: data not pinned: ")
    assert lines[-1].endswith(": OK (1 warning)")

    shutil.rmtree(root / ".git")
    git(root, "init", "-q")
    (root / "releases" / V1_PIN.release).rename(root / "releases" / "testlist_demo.yaml")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "demo")
    head = git(root, "rev-parse", "HEAD")
    out = io.StringIO()
    assert validate_command(root, out=out) == 0
    lines = out.getvalue().splitlines()
    assert lines[0] == f"data: git {head[:12]} (no tag)"
    assert lines[-1].endswith(": OK")
