"""The run directory survives kills and refuses what would corrupt a score."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bench.run.errors import BundleChanged, OutputLocked
from bench.run.output import BUNDLE_KEYS, RunOutput, merge_previous_manifest, set_aside


def test_done_skips_finished_attempts_and_reruns_errors_only_when_asked(tmp_path: Path) -> None:
    out = RunOutput(tmp_path)
    out.append(out.results, json.dumps({"task_id": "a", "repeat": 0, "system_error": False}))
    out.append(out.results, json.dumps({"task_id": "a", "repeat": 1, "system_error": True}))
    assert out.done(retry_errors=False) == {("a", 0), ("a", 1)}
    assert out.done(retry_errors=True) == {("a", 0)}


def test_repair_cuts_a_half_written_last_line_and_keeps_it_aside(tmp_path: Path) -> None:
    out = RunOutput(tmp_path)
    whole = json.dumps({"task_id": "a", "repeat": 0, "system_error": False})
    out.results.write_text(whole + "\n" + '{"task_id": "a", "rep')
    assert out.repair() == ["results.jsonl"]
    assert out.results.read_text() == whole + "\n"
    assert (tmp_path / "results.jsonl.partial").read_text() == '{"task_id": "a", "rep\n'
    # The next row starts on its own line instead of fusing with the fragment.
    out.append(out.results, json.dumps({"task_id": "a", "repeat": 1, "system_error": False}))
    assert out.done(retry_errors=False) == {("a", 0), ("a", 1)}
    assert out.repair() == []


def test_a_second_writer_of_the_same_directory_is_refused(tmp_path: Path) -> None:
    first = RunOutput(tmp_path)
    first.lock()
    code = (
        "import sys; from pathlib import Path; from bench.run.output import RunOutput; "
        f"RunOutput(Path({str(tmp_path)!r})).lock()"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert "is being written by tbx run pid" in proc.stderr
    with pytest.raises(OutputLocked, match=f"tbx run pid {os.getpid()}"):
        RunOutput(tmp_path).lock()


def _manifest(**changes: object) -> dict[str, object]:
    base: dict[str, object] = {k: f"{k}-1" for k in BUNDLE_KEYS}
    base.update(run_id="run-1", started_at="2026-01-01T00:00:00+00:00")
    base.update(changes)
    return base


def test_resume_keeps_history_and_refuses_a_different_bundle(tmp_path: Path) -> None:
    (tmp_path / "manifest.json").write_text(json.dumps(_manifest()))
    (tmp_path / "results.jsonl").write_text('{"task_id": "a", "repeat": 0}\n')

    same = _manifest(run_id="run-2", started_at="later")
    merge_previous_manifest(tmp_path, same)
    assert same["previous_run_ids"] == ["run-1"]
    assert same["started_at"] == "2026-01-01T00:00:00+00:00" and "resumed_at" in same

    with pytest.raises(BundleChanged, match="different bundle \\(image_digests changed\\)"):
        merge_previous_manifest(tmp_path, _manifest(image_digests="other"))

    # Without results there is nothing to mix: a changed bundle may reuse the directory.
    (tmp_path / "results.jsonl").write_text("")
    merge_previous_manifest(tmp_path, _manifest(image_digests="other"))


def test_a_superseded_run_is_set_aside_whole(tmp_path: Path) -> None:
    out = RunOutput(tmp_path)
    out.lock()
    out.append(out.results, json.dumps({"task_id": "a", "repeat": 0, "system_error": False}))
    (tmp_path / "attempts" / "att-1.json").write_text("{}")
    (tmp_path / "manifest.json").write_text(json.dumps(_manifest()))
    with pytest.raises(BundleChanged) as change:
        merge_previous_manifest(tmp_path, _manifest(git_commit="newer"))
    assert change.value.changed == ["git_commit"]

    dest = set_aside(tmp_path, change.value.previous)
    assert dest == tmp_path / "superseded" / "run-1"
    assert (dest / "results.jsonl").read_text().count("\n") == 1
    assert (dest / "attempts" / "att-1.json").exists() and (dest / "manifest.json").exists()
    assert not out.results.exists() and not (tmp_path / "manifest.json").exists()
    out.make_dirs()
    assert out.done(retry_errors=False) == set()
    # A second supersession of the same run id does not overwrite the first.
    out.append(out.results, "{}")
    assert set_aside(tmp_path, change.value.previous) == tmp_path / "superseded" / "run-1-2"


@pytest.mark.parametrize(
    ("cores", "gib", "builtin", "model"),
    [(2, 24, 2, 8), (2, 6, 2, 2), (16, 24, 8, 8), (8, 3, 1, 1)],
)
def test_default_concurrency_fits_cores_and_memory(
    monkeypatch: pytest.MonkeyPatch, cores: int, gib: int, builtin: int, model: int
) -> None:
    import os

    from bench.run.sizing import MEMORY_PER_ATTEMPT_GIB, default_concurrency

    page = 4096
    monkeypatch.setattr(os, "cpu_count", lambda: cores)
    monkeypatch.setattr(os, "sysconf", lambda name: page if name == "SC_PAGE_SIZE" else gib * 2**30 // page)
    assert default_concurrency() == builtin
    assert default_concurrency(model_agent=True) == model
    # The default leaves room for a warm pool as large as the concurrency even by the
    # containers' limits; admission by measured use (tests/unit/sandbox/test_admission.py) admits more.
    for c in (builtin, model):
        assert 2 * c * MEMORY_PER_ATTEMPT_GIB <= gib


def test_a_row_the_disk_cannot_hold_is_cut_off_whole_and_names_the_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """ENOSPC after part of a row went out (a short write, then the error): the
    file ends where it did before, and the error says which file and what to do."""
    import errno

    from bench.run import output as output_mod
    from bench.run.errors import OutputUnwritable

    out = RunOutput(tmp_path)
    first = json.dumps({"task_id": "a", "repeat": 0, "system_error": False})
    out.append(out.results, first)
    real_write = os.write
    calls: list[int] = []

    def full_disk(fd: int, data: bytes | memoryview) -> int:
        calls.append(len(data))
        if len(calls) == 1:
            return real_write(fd, bytes(data[:10]))  # part of the row reached the disk
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(output_mod.os, "write", full_disk)
    with pytest.raises(OutputUnwritable) as raised:
        out.append(out.results, json.dumps({"task_id": "a", "repeat": 1, "system_error": False}))
    monkeypatch.undo()
    assert len(calls) == 2
    assert out.results.read_text() == first + "\n"
    assert f"cannot write {out.results}: No space left on device" in str(raised.value)
    assert "resume" in str(raised.value)


def test_a_state_the_disk_cannot_hold_leaves_no_temporary_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import errno

    from bench.run.errors import OutputUnwritable

    out = RunOutput(tmp_path)

    def full_disk(self: Path, data: bytes) -> int:
        self.open("wb").write(data[:5])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(Path, "write_bytes", full_disk)
    with pytest.raises(OutputUnwritable, match=r"states/x\.initial\.json\.gz"):
        out.write_state("x.initial", {})
    monkeypatch.undo()
    assert list((tmp_path / "states").iterdir()) == []
